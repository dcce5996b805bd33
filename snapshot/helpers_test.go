package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// entry is one path of a tree as the tests compare it.
type entry struct {
	Type    string // "file", "dir", "link"
	Mode    fs.FileMode
	Content string // file content
	Target  string // link target
}

func file(content string, mode fs.FileMode) entry {
	return entry{Type: "file", Mode: mode, Content: content}
}
func dir(mode fs.FileMode) entry { return entry{Type: "dir", Mode: mode} }
func link(target string) entry   { return entry{Type: "link", Target: target} }

// writeTree makes the entries under root, parents first; directory modes
// are set last so that read-only directories can be filled.
func writeTree(t testing.TB, root string, ents map[string]entry) {
	t.Helper()
	paths := make([]string, 0, len(ents))
	for p := range ents {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		e := ents[p]
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		switch e.Type {
		case "dir":
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
		case "file":
			if err := os.WriteFile(full, []byte(e.Content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(full, e.Mode); err != nil {
				t.Fatal(err)
			}
		case "link":
			if err := os.Symlink(e.Target, full); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := len(paths) - 1; i >= 0; i-- {
		if e := ents[paths[i]]; e.Type == "dir" {
			if err := os.Chmod(filepath.Join(root, paths[i]), e.Mode); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// listing reads a whole tree back: type, mode (permission and special
// bits), content, link target. Paths under skip (relative) are left out.
func listing(t testing.TB, root string, skip ...string) map[string]entry {
	t.Helper()
	out := map[string]entry{}
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
			out[rel] = entry{Type: "file", Mode: mode, Content: string(b)}
		case fi.IsDir():
			out[rel] = entry{Type: "dir", Mode: mode}
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = entry{Type: "link", Target: target}
		default:
			out[rel] = entry{Type: fi.Mode().Type().String()}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ageTree sets every file's and directory's mtime an hour back, as a tree
// that was not just written: its stat cache entries are then not racy.
func ageTree(t testing.TB, root string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		return os.Chtimes(p, old, old)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// openUpOnCleanup makes dir removable by TempDir's cleanup whatever modes
// a test left in it.
func openUpOnCleanup(t testing.TB, dir string) {
	t.Cleanup(func() {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o755)
			}
			return nil
		})
	})
}

type fixture struct {
	t     testing.TB
	store *Store
	dir   string // the store's
	root  string
	ctx   context.Context
}

func newFixture(t testing.TB, opts Options) *fixture {
	t.Helper()
	base := t.TempDir()
	openUpOnCleanup(t, base)
	fx := &fixture{t: t, dir: filepath.Join(base, "store"), root: filepath.Join(base, "root"), ctx: context.Background()}
	if err := os.Mkdir(fx.root, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Open(fx.dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	fx.store = s
	return fx
}

func (fx *fixture) take(o TakeOptions) Info {
	fx.t.Helper()
	info, err := fx.store.Take(fx.ctx, fx.root, o)
	if err != nil {
		fx.t.Fatal(err)
	}
	fx.settle()
	return info
}

// settle waits for what the store does after its answers (the stat cache
// made, the trash emptied), so that a test looks at a quiet store. The
// stat cache is written later (see statCacheDelay).
func (fx *fixture) settle() { fx.store.bg.Wait() }

func (fx *fixture) restore(id string, o RestoreOptions) RestoreResult {
	fx.t.Helper()
	res, err := fx.store.Restore(fx.ctx, id, fx.root, o)
	if err != nil {
		fx.t.Fatal(err)
	}
	fx.settle()
	return res
}

func (fx *fixture) write(rel, content string) {
	fx.t.Helper()
	p := filepath.Join(fx.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		fx.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		fx.t.Fatal(err)
	}
}

// storeFiles lists the store directory: every file's path and content hash
// (lock files left out: flock makes them).
func storeFiles(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Name() == "lock" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		sum := sha256.Sum256(b)
		out[rel] = hex.EncodeToString(sum[:8])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// storedBlob is one blob of a store as it lies on disk: a loose file, or
// a range of a pack.
type storedBlob struct {
	h         hash32
	path      string // the blob's file, or its pack's
	off, size int64
}

// storedBlobs lists a store's blobs from its files: the loose ones, and
// those its packs' indexes name.
func storedBlobs(t testing.TB, dir string) []storedBlob {
	t.Helper()
	var out []storedBlob
	for p := range storeFiles(t, dir) {
		if rest, ok := strings.CutPrefix(p, "blobs/"); ok {
			b, err := hex.DecodeString(strings.Replace(rest, "/", "", 1))
			if err != nil || len(b) != sha256.Size {
				t.Fatalf("blob file %s", p)
			}
			fi, err := os.Stat(filepath.Join(dir, p))
			must(t, err)
			out = append(out, storedBlob{h: hash32(b), path: filepath.Join(dir, p), size: fi.Size()})
		}
	}
	ents, err := os.ReadDir(filepath.Join(dir, "packs"))
	must(t, err)
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".idx")
		if !ok || strings.HasPrefix(id, ".") {
			continue
		}
		entries, err := readPackIndex(filepath.Join(dir, "packs", e.Name()))
		must(t, err)
		for _, en := range entries {
			out = append(out, storedBlob{h: en.h, path: filepath.Join(dir, "packs", id+".pack"), off: en.off, size: en.size})
		}
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].h[:], out[j].h[:]) < 0 })
	return out
}

// storedBlobOf finds blob h in the store's files.
func storedBlobOf(t testing.TB, dir string, h hash32) storedBlob {
	t.Helper()
	for _, b := range storedBlobs(t, dir) {
		if b.h == h {
			return b
		}
	}
	t.Fatalf("no blob %x in %s", h, dir)
	return storedBlob{}
}

func (b storedBlob) read(t testing.TB) []byte {
	t.Helper()
	f, err := os.Open(b.path)
	must(t, err)
	defer f.Close()
	data := make([]byte, b.size)
	_, err = f.ReadAt(data, b.off)
	must(t, err)
	return data
}

// write puts data in the blob's place, as damage would.
func (b storedBlob) write(t testing.TB, data []byte) {
	t.Helper()
	f, err := os.OpenFile(b.path, os.O_WRONLY, 0)
	must(t, err)
	defer f.Close()
	_, err = f.WriteAt(data, b.off)
	must(t, err)
}

// cut leaves only the blob's first n bytes in its file: a truncated loose
// blob, or a pack cut short.
func (b storedBlob) cut(t testing.TB, n int64) {
	t.Helper()
	must(t, os.Truncate(b.path, b.off+n))
}

func blobOf(content string) hash32 { return sha256.Sum256([]byte(content)) }

// setHook sets a package hook for the test's duration.
func setHook[T any](t testing.TB, p *T, v T) {
	old := *p
	*p = v
	t.Cleanup(func() { *p = old })
}

func wantErr(t testing.TB, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
}
