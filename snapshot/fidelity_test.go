package snapshot

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var fidelityNames = []string{
	"a.txt", "b", "README.md", "main.go", "ünïcödé", "日本語.txt", "with space", " lead",
	"new\nline", "tab\there", "émoji-🙂", "x.bin", "deep", "sub", ".hidden", "-dash",
	"quote\"s", "back\\slash", "z", "UPPER",
}

type treeGen struct {
	rng  *rand.Rand
	root string
}

func (g *treeGen) name() string {
	n := fidelityNames[g.rng.IntN(len(fidelityNames))]
	if g.rng.IntN(3) == 0 {
		n += fmt.Sprint(g.rng.IntN(100))
	}
	return n
}

func (g *treeGen) content() string {
	switch g.rng.IntN(6) {
	case 0:
		return ""
	case 1: // binary, with NULs
		b := make([]byte, g.rng.IntN(5000))
		for i := range b {
			b[i] = byte(g.rng.IntN(256))
		}
		return string(b)
	case 2: // large: past the in-memory path
		b := make([]byte, bufSize+g.rng.IntN(100_000))
		for i := range b {
			b[i] = byte('a' + i%26)
		}
		b[g.rng.IntN(len(b))] = '\n'
		return string(b)
	default: // text lines
		var sb strings.Builder
		for range g.rng.IntN(40) {
			fmt.Fprintf(&sb, "line %d ünï %d\n", g.rng.IntN(10), g.rng.IntN(1000))
		}
		if g.rng.IntN(2) == 0 {
			sb.WriteString("no newline at the end")
		}
		return sb.String()
	}
}

var fileModes = []fs.FileMode{0o644, 0o600, 0o755, 0o400, 0o777, 0o640 | fs.ModeSetuid, 0o755 | fs.ModeSetgid}
var dirModes = []fs.FileMode{0o755, 0o700, 0o555, 0o775 | fs.ModeSticky}

func (g *treeGen) linkTarget(rel string) string {
	switch g.rng.IntN(4) {
	case 0:
		return "../" + g.name()
	case 1:
		return g.name()
	case 2:
		return filepath.Join(g.root, g.name()) // absolute
	default:
		return "/nonexistent/dangling/" + g.name()
	}
}

// fill makes a random tree under rel (a directory that exists).
func (g *treeGen) fill(ents map[string]entry, rel string, depth int) {
	n := g.rng.IntN(6)
	if depth == 0 {
		n += 3
	}
	for range n {
		p := path.Join(rel, g.name())
		if _, ok := ents[p]; ok {
			continue
		}
		switch k := g.rng.IntN(10); {
		case k < 5:
			ents[p] = file(g.content(), fileModes[g.rng.IntN(len(fileModes))])
		case k < 7:
			ents[p] = link(g.linkTarget(p))
		default:
			ents[p] = dir(dirModes[g.rng.IntN(len(dirModes))])
			if depth < 4 {
				g.fill(ents, p, depth+1)
			}
		}
	}
	if depth == 0 {
		// Always some depth and an empty directory.
		deep := "deep"
		for i := range 12 {
			deep = path.Join(deep, fmt.Sprint("level", i))
		}
		ents[deep] = dir(0o755)
		ents[path.Join(deep, "bottom.txt")] = file("bottom\n", 0o644)
		ents["empty"] = dir(0o700)
	}
	fixParents(ents)
}

// fixParents makes every parent of an entry a directory entry.
func fixParents(ents map[string]entry) {
	for p := range ents {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if e, ok := ents[d]; !ok || e.Type != "dir" {
				ents[d] = dir(0o755)
			}
		}
	}
}

// mutate changes the tree on disk at random, n times.
func (g *treeGen) mutate(t testing.TB, n int) {
	for range n {
		cur := listing(t, g.root, ".git")
		paths := make([]string, 0, len(cur))
		for p := range cur {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		var p string
		if len(paths) > 0 {
			p = paths[g.rng.IntN(len(paths))]
		}
		full := filepath.Join(g.root, p)
		if p != "" {
			// Make the parent writable for the change (and the entry, if a
			// directory); listing compares modes after the restore anyway.
			os.Chmod(filepath.Dir(full), 0o755)
		}
		switch op := g.rng.IntN(8); {
		case p == "" || op == 0: // add
			parent := "."
			if p != "" && cur[p].Type == "dir" {
				parent = p
				os.Chmod(full, 0o755)
			}
			ents := map[string]entry{}
			g.fill(ents, parent, 3)
			for q := range ents {
				if _, ok := cur[q]; ok || q == "." {
					delete(ents, q)
				}
			}
			writeNew(t, g.root, ents)
		case op == 1: // delete
			os.Chmod(full, 0o755)
			openUpAll(full)
			must(t, os.RemoveAll(full))
		case op == 2 && cur[p].Type == "file": // edit, sometimes to the same size
			c := g.content()
			if g.rng.IntN(2) == 0 && len(cur[p].Content) > 0 {
				b := []byte(cur[p].Content)
				b[g.rng.IntN(len(b))] ^= 0x5a
				c = string(b)
			}
			os.Chmod(full, 0o644)
			must(t, os.WriteFile(full, []byte(c), 0o644))
		case op == 3 && cur[p].Type != "link": // chmod
			if cur[p].Type == "dir" {
				must(t, os.Chmod(full, dirModes[g.rng.IntN(len(dirModes))]))
			} else {
				must(t, os.Chmod(full, fileModes[g.rng.IntN(len(fileModes))]))
			}
		case op == 4: // replace by a directory with something in it
			openUpAll(full)
			must(t, os.RemoveAll(full))
			must(t, os.Mkdir(full, 0o755))
			must(t, os.WriteFile(filepath.Join(full, "inside"), []byte("was replaced\n"), 0o644))
		case op == 5: // replace by a symlink
			openUpAll(full)
			must(t, os.RemoveAll(full))
			must(t, os.Symlink(g.linkTarget(p), full))
		case op == 6: // replace by a file
			openUpAll(full)
			must(t, os.RemoveAll(full))
			must(t, os.WriteFile(full, []byte(g.content()), 0o600))
		default: // retarget a symlink, or touch .git
			if cur[p].Type == "link" {
				must(t, os.Remove(full))
				must(t, os.Symlink(g.linkTarget(p)+"2", full))
			} else {
				must(t, os.WriteFile(filepath.Join(g.root, ".git", "HEAD"), []byte(g.content()), 0o644))
			}
		}
	}
}

func writeNew(t testing.TB, root string, ents map[string]entry) {
	t.Helper()
	for p, e := range ents {
		if e.Type == "dir" {
			if fi, err := os.Lstat(filepath.Join(root, p)); err == nil && !fi.IsDir() {
				delete(ents, p)
			}
		}
	}
	for p := range ents {
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			delete(ents, p)
		}
	}
	// Parents that are not directories on disk: leave those entries out.
	for p := range ents {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			fi, err := os.Lstat(filepath.Join(root, d))
			if err == nil && !fi.IsDir() {
				delete(ents, p)
				break
			}
		}
	}
	writeTree(t, root, ents)
}

func openUpAll(p string) {
	filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(q, 0o755)
		}
		return nil
	})
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// checkFidelity takes a random tree, mutates it, restores it, and compares
// the whole tree (bytes and metadata) with what was taken; .git stays as
// the mutations left it.
func checkFidelity(t testing.TB, seed uint64, mutations int) {
	fx := newFixture(t, Options{Workers: 2})
	g := &treeGen{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), root: fx.root}
	ents := map[string]entry{".git": dir(0o755), ".git/HEAD": file("ref: refs/heads/main\n", 0o644)}
	g.fill(ents, ".", 0)
	writeTree(t, fx.root, ents)
	if seed%2 == 0 {
		ageTree(t, fx.root) // the stat cache then vouches for unchanged files
	}
	want := listing(t, fx.root, ".git")
	info := fx.take(TakeOptions{Label: "fidelity"})
	g.mutate(t, mutations)
	gitBefore := listing(t, filepath.Join(fx.root, ".git"))
	changed := !cmp.Equal(want, listing(t, fx.root, ".git"))
	res := fx.restore(info.ID, RestoreOptions{})
	t.Logf("seed %d: %d entries, %d mutations (tree changed: %v): %d written, %d removed", seed, len(want), mutations, changed, res.Written, res.Removed)
	if changed && res.Written+res.Removed == 0 {
		t.Fatalf("seed %d: the tree changed and the restore did nothing", seed)
	}
	if diff := cmp.Diff(want, listing(t, fx.root, ".git")); diff != "" {
		t.Fatalf("seed %d: restored tree: mismatch (-want +got):\n%s", seed, diff)
	}
	if diff := cmp.Diff(gitBefore, listing(t, filepath.Join(fx.root, ".git"))); diff != "" {
		t.Fatalf("seed %d: .git was touched: mismatch (-want +got):\n%s", seed, diff)
	}
	d, err := fx.store.Diff(context.Background(), info.ID, "", fx.root, DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Changes) != 0 {
		t.Fatalf("seed %d: diff after restore: %v", seed, d.Changes)
	}
}

// TestFidelityRandom is the randomized table: random trees, random
// mutations, a restore, and the whole tree compared.
func TestFidelityRandom(t *testing.T) {
	n := 40
	if testing.Short() {
		n = 8
	}
	for seed := range uint64(n) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			checkFidelity(t, seed, 1+int(seed%7))
		})
	}
}

// FuzzFidelity is the fidelity check as a fuzz target; its seed corpus
// runs with go test.
func FuzzFidelity(f *testing.F) {
	for _, s := range []struct {
		seed uint64
		n    uint8
	}{{1000, 1}, {1001, 3}, {1002, 8}, {1003, 12}} {
		f.Add(s.seed, s.n)
	}
	f.Fuzz(func(t *testing.T, seed uint64, n uint8) {
		checkFidelity(t, seed, 1+int(n%16))
	})
}
