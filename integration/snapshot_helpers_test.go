package integration

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// snapEntry is one path of a tree as the snapshot tests compare it: its
// type, its permission bits (with setuid, setgid and sticky), a file's
// bytes and a symlink's target.
type snapEntry struct {
	Type    string // "file", "dir", "link", or another type's name
	Mode    fs.FileMode
	Content string
	Target  string
}

func snapFile(content string, mode fs.FileMode) snapEntry {
	return snapEntry{Type: "file", Mode: mode, Content: content}
}
func snapDir(mode fs.FileMode) snapEntry { return snapEntry{Type: "dir", Mode: mode} }
func snapLink(target string) snapEntry   { return snapEntry{Type: "link", Target: target} }

// snapListing reads a whole tree back. Paths under skip (relative, with
// "/") are left out.
func snapListing(t testing.TB, root string, skip ...string) map[string]snapEntry {
	t.Helper()
	out := map[string]snapEntry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		for _, s := range skip {
			if rel == s || strings.HasPrefix(rel, s+"/") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		mode := fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = snapEntry{Type: "file", Mode: mode, Content: string(b)}
		case fi.IsDir():
			out[rel] = snapEntry{Type: "dir", Mode: mode}
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = snapEntry{Type: "link", Target: target}
		default:
			out[rel] = snapEntry{Type: fi.Mode().Type().String()}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// snapWriteTree makes the entries under root, parents first; the modes of
// directories are set last, deepest first, so that read-only ones can be
// filled.
func snapWriteTree(t testing.TB, root string, ents map[string]snapEntry) {
	t.Helper()
	paths := make([]string, 0, len(ents))
	for p := range ents {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		e := ents[p]
		full := filepath.Join(root, p)
		mustDo(t, os.MkdirAll(filepath.Dir(full), 0o755))
		switch e.Type {
		case "dir":
			mustDo(t, os.MkdirAll(full, 0o755))
		case "file":
			mustDo(t, os.WriteFile(full, []byte(e.Content), 0o600))
			mustDo(t, os.Chmod(full, e.Mode))
		case "link":
			mustDo(t, os.Symlink(e.Target, full))
		}
	}
	for i := len(paths) - 1; i >= 0; i-- {
		if e := ents[paths[i]]; e.Type == "dir" {
			mustDo(t, os.Chmod(filepath.Join(root, paths[i]), e.Mode))
		}
	}
}

func mustDo(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// snapOpenUp makes every directory under p writable, so that what is in
// it can be changed or removed.
func snapOpenUp(p string) {
	filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(q, 0o755)
		}
		return nil
	})
}

// snapOpenUpOnCleanup makes dir removable by TempDir's cleanup whatever
// modes a test left in it; call it after the TempDir was made.
func snapOpenUpOnCleanup(t testing.TB, dir string) {
	t.Cleanup(func() { snapOpenUp(dir) })
}

// snapAge sets the mtimes of root's files and directories an hour back,
// as a tree not just written: the store's index then vouches for them.
func snapAge(t testing.TB, root string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		return os.Chtimes(p, old, old)
	})
	mustDo(t, err)
}

// snapNames are the names of the random trees: unicode, spaces, a newline,
// a tab, quotes, a backslash, a leading dash and dot.
var snapNames = []string{
	"a.txt", "b", "README.md", "main.go", "ünïcödé", "日本語.txt", "with space", " lead", "trail ",
	"new\nline", "tab\there", "émoji-🙂", "x.bin", "sub", ".hidden", "-dash",
	"quote\"s", "back\\slash", "z", "UPPER",
}

var (
	snapFileModes = []fs.FileMode{0o644, 0o600, 0o755, 0o400, 0o777, 0o640 | fs.ModeSetuid, 0o755 | fs.ModeSetgid}
	snapDirModes  = []fs.FileMode{0o755, 0o700, 0o555, 0o775 | fs.ModeSticky}
)

// snapGen makes random trees and changes them at random.
type snapGen struct {
	rng  *rand.Rand
	root string
}

func newSnapGen(seed uint64, root string) *snapGen {
	return &snapGen{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), root: root}
}

func (g *snapGen) name() string {
	n := snapNames[g.rng.IntN(len(snapNames))]
	if g.rng.IntN(3) == 0 {
		n += fmt.Sprint(g.rng.IntN(100))
	}
	return n
}

func (g *snapGen) content() string {
	switch g.rng.IntN(8) {
	case 0:
		return ""
	case 1, 2: // binary, NULs included
		b := make([]byte, g.rng.IntN(5000))
		for i := range b {
			b[i] = byte(g.rng.IntN(256))
		}
		return string(b)
	case 3: // past the store's 256 KiB threshold (cloned or copied whole)
		if g.rng.IntN(3) != 0 {
			return "small instead\n"
		}
		b := make([]byte, 256<<10+g.rng.IntN(50_000))
		for i := range b {
			b[i] = byte('a' + i%26)
		}
		b[g.rng.IntN(len(b))] = '\n'
		return string(b)
	default: // text
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

// linkTarget is a relative, absolute (inside the root) or dangling
// target.
func (g *snapGen) linkTarget() string {
	switch g.rng.IntN(4) {
	case 0:
		return "../" + g.name()
	case 1:
		return g.name()
	case 2:
		return filepath.Join(g.root, g.name())
	default:
		return "/nonexistent/dangling/" + g.name()
	}
}

// fill adds a random tree under rel to ents; at depth 0 also a deep
// directory and an empty one.
func (g *snapGen) fill(ents map[string]snapEntry, rel string, depth int) {
	n := g.rng.IntN(7)
	if depth == 0 {
		n += 8
	}
	for range n {
		p := path.Join(rel, g.name())
		if _, ok := ents[p]; ok {
			continue
		}
		switch k := g.rng.IntN(10); {
		case k < 5:
			ents[p] = snapFile(g.content(), snapFileModes[g.rng.IntN(len(snapFileModes))])
		case k < 7:
			ents[p] = snapLink(g.linkTarget())
		default:
			ents[p] = snapDir(snapDirModes[g.rng.IntN(len(snapDirModes))])
			if depth < 4 {
				g.fill(ents, p, depth+1)
			}
		}
	}
	if depth == 0 {
		deep := "deep"
		for i := range 12 {
			deep = path.Join(deep, fmt.Sprint("level ", i))
		}
		ents[deep] = snapDir(0o755)
		ents[path.Join(deep, "bottom.txt")] = snapFile("bottom\n", 0o644)
		ents["empty"] = snapDir(0o700)
		ents["empty too"] = snapDir(0o555)
	}
	// Every parent is a directory.
	for p := range ents {
		for d := path.Dir(p); d != "." && d != rel; d = path.Dir(d) {
			if e, ok := ents[d]; !ok || e.Type != "dir" {
				ents[d] = snapDir(0o755)
			}
		}
	}
}

// mutate changes the tree on disk n times at random: an edit (sometimes
// of one byte, the size kept), a deletion, an addition, a chmod, a type
// change (to a directory, a symlink, a file), a symlink retargeted, and
// .git touched (which a restore must leave as it is). It returns what it
// did, for the failure message.
func (g *snapGen) mutate(t testing.TB, n int) []string {
	t.Helper()
	var did []string
	for range n {
		cur := snapListing(t, g.root, ".git")
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
			os.Chmod(filepath.Dir(full), 0o755)
		}
		// The operations that fit the entry's type; .git now and then.
		ops := map[string][]string{
			"file": {"add", "delete", "edit", "edit", "chmod", "to dir", "to link"},
			"dir":  {"add", "add", "delete", "chmod", "to file", "to link"},
			"link": {"add", "delete", "retarget", "to dir", "to file"},
		}[cur[p].Type]
		op := "add"
		if p != "" && len(ops) > 0 {
			op = ops[g.rng.IntN(len(ops))]
		}
		if g.rng.IntN(10) == 0 {
			op = "git"
		}
		switch {
		case op == "add":
			parent := "."
			if p != "" && cur[p].Type == "dir" {
				parent = p
				os.Chmod(full, 0o755)
			}
			ents := map[string]snapEntry{}
			g.fill(ents, parent, 3)
			for q := range ents {
				if _, ok := cur[q]; ok {
					delete(ents, q)
				}
			}
			g.writeNew(t, ents)
			did = append(did, fmt.Sprintf("add %d under %q", len(ents), parent))
		case op == "delete":
			snapOpenUp(full)
			mustDo(t, os.RemoveAll(full))
			did = append(did, fmt.Sprintf("delete %q", p))
		case op == "edit":
			c := g.content()
			if g.rng.IntN(2) == 0 && len(cur[p].Content) > 0 {
				b := []byte(cur[p].Content)
				b[g.rng.IntN(len(b))] ^= 0x5a
				c = string(b)
			}
			os.Chmod(full, 0o644)
			mustDo(t, os.WriteFile(full, []byte(c), 0o644))
			did = append(did, fmt.Sprintf("edit %q", p))
		case op == "chmod":
			m := snapFileModes[g.rng.IntN(len(snapFileModes))]
			if cur[p].Type == "dir" {
				m = snapDirModes[g.rng.IntN(len(snapDirModes))]
			}
			mustDo(t, os.Chmod(full, m))
			did = append(did, fmt.Sprintf("chmod %q %v", p, m))
		case op == "to dir":
			snapOpenUp(full)
			mustDo(t, os.RemoveAll(full))
			mustDo(t, os.Mkdir(full, 0o755))
			mustDo(t, os.WriteFile(filepath.Join(full, "inside"), []byte("was replaced\n"), 0o644))
			did = append(did, fmt.Sprintf("%q to a directory", p))
		case op == "to link":
			snapOpenUp(full)
			mustDo(t, os.RemoveAll(full))
			mustDo(t, os.Symlink(g.linkTarget(), full))
			did = append(did, fmt.Sprintf("%q to a symlink", p))
		case op == "to file":
			snapOpenUp(full)
			mustDo(t, os.RemoveAll(full))
			mustDo(t, os.WriteFile(full, []byte(g.content()), 0o600))
			did = append(did, fmt.Sprintf("%q to a file", p))
		case op == "retarget":
			mustDo(t, os.Remove(full))
			mustDo(t, os.Symlink(g.linkTarget()+"2", full))
			did = append(did, fmt.Sprintf("retarget %q", p))
		default:
			mustDo(t, os.WriteFile(filepath.Join(g.root, ".git", "HEAD"), []byte(g.content()), 0o644))
			did = append(did, "touch .git/HEAD")
		}
	}
	return did
}

// writeNew writes the entries that neither exist nor lie under something
// that is not a directory.
func (g *snapGen) writeNew(t testing.TB, ents map[string]snapEntry) {
	t.Helper()
	for p := range ents {
		if _, err := os.Lstat(filepath.Join(g.root, p)); err == nil {
			delete(ents, p)
			continue
		}
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if fi, err := os.Lstat(filepath.Join(g.root, d)); err == nil && !fi.IsDir() {
				delete(ents, p)
				break
			}
		}
	}
	snapWriteTree(t, g.root, ents)
}
