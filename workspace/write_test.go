package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// noTemps fails if a temporary file of WriteFile is left anywhere in the root.
func noTemps(t *testing.T, root string) {
	t.Helper()
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), tempPrefix) {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}

func mode(t *testing.T, p string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

func TestWriteNewAndOverwrite(t *testing.T) {
	fx := newFixture(t)
	res, err := fx.w.WriteFile(WriteOptions{Path: "new.txt", Content: "fresh\n"})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(fx.root, "new.txt")
	if diff := cmp.Diff(&WriteResult{Path: p, Size: 6, Sha256: sha("fresh\n")}, res); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if got := readString(t, p); got != "fresh\n" {
		t.Errorf("content %q", got)
	}
	if m := mode(t, p); m != 0o644 {
		t.Errorf("new file mode %v, want 0644", m)
	}

	// The old mode is kept, exactly, whatever the umask.
	for _, m := range []fs.FileMode{0o600, 0o755, 0o640} {
		if err := os.Chmod(p, m); err != nil {
			t.Fatal(err)
		}
		if _, err := fx.w.WriteFile(WriteOptions{Path: p, Content: "mode " + m.String()}); err != nil {
			t.Fatal(err)
		}
		if got := mode(t, p); got != m {
			t.Errorf("mode after overwrite %v, want %v", got, m)
		}
	}

	// base64, and a file URI.
	res, err = fx.w.WriteFile(WriteOptions{Path: "file://" + p, Content: "AP8K", Encoding: "base64"})
	if err != nil {
		t.Fatal(err)
	}
	if got := readString(t, p); got != "\x00\xff\n" || res.Size != 3 || res.Sha256 != sha("\x00\xff\n") {
		t.Errorf("base64 write: content %q, result %+v", got, res)
	}
	noTemps(t, fx.root)
	fx.checkUntouched(t)
}

func TestWriteInvalid(t *testing.T) {
	fx := newFixture(t)
	for _, tc := range []struct {
		name string
		o    WriteOptions
		want error
	}{
		{"empty path", WriteOptions{Path: ""}, ErrInvalid},
		{"bad base64", WriteOptions{Path: "x.txt", Content: "!!", Encoding: "base64"}, ErrInvalid},
		{"unknown encoding", WriteOptions{Path: "x.txt", Encoding: "latin1"}, ErrInvalid},
		{"short sha", WriteOptions{Path: "x.txt", ExpectedSha256: "abc"}, ErrInvalid},
		{"non-hex sha", WriteOptions{Path: "x.txt", ExpectedSha256: strings.Repeat("g", 64)}, ErrInvalid},
		{"directory", WriteOptions{Path: "sub"}, ErrNotRegular},
		{"the root", WriteOptions{Path: "."}, ErrNotRegular},
		{"trailing slash", WriteOptions{Path: "x.txt/"}, ErrNotRegular},
		{"missing parent", WriteOptions{Path: "a/b/c.txt"}, ErrNotFound},
		{"parent is a file", WriteOptions{Path: "hello.txt/c.txt"}, ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fx.w.WriteFile(tc.o)
			checkErr(t, "WriteFile", err, tc.want)
		})
	}
	if _, err := os.Lstat(filepath.Join(fx.root, "a")); err == nil {
		t.Error("a refused write created a directory")
	}
	if _, err := os.Lstat(filepath.Join(fx.root, "x.txt")); err == nil {
		t.Error("a refused write created x.txt")
	}
	noTemps(t, fx.root)
}

func TestWriteCreateDirs(t *testing.T) {
	fx := newFixture(t)
	res, err := fx.w.WriteFile(WriteOptions{Path: "a/b/c.txt", Content: "deep\n", CreateDirs: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(fx.root, "a", "b", "c.txt"); res.Path != want || readString(t, want) != "deep\n" {
		t.Errorf("wrote %s, want %s with the content", res.Path, want)
	}
	for _, d := range []string{"a", "a/b"} {
		if m := mode(t, filepath.Join(fx.root, d)); !m.IsDir() || m.Perm()&0o700 != 0o700 {
			t.Errorf("%s: mode %v", d, m)
		}
	}
	// createDirs through an in-root symlinked directory.
	mustSymlink(t, "sub", filepath.Join(fx.root, "sublink"))
	if _, err := fx.w.WriteFile(WriteOptions{Path: "sublink/x/y.txt", Content: "y", CreateDirs: true}); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, filepath.Join(fx.root, "sub", "x", "y.txt")); got != "y" {
		t.Errorf("content %q", got)
	}
	fx.checkUntouched(t)
}

func TestWriteConflict(t *testing.T) {
	fx := newFixture(t)
	mustWrite(t, filepath.Join(fx.root, "empty.txt"), "")
	wrong := sha("something else")
	for _, tc := range []struct {
		name, path, expected string
		want                 error  // nil: the write succeeds
		actual               string // PathError.Actual on conflict
	}{
		{"no check", "nocheck.txt", "", nil, ""},
		{"match", "secret.txt", sha("inside\n"), nil, ""},
		{"match upper-case", "sub/inner.txt", strings.ToUpper(sha("inner\n")), nil, ""},
		{"mismatch", "hello.txt", wrong, ErrConflict, sha("hello\n")},
		{"must not exist, and does not", "brand-new.txt", AbsentSha256, nil, ""},
		{"must not exist, but does", "hello.txt", AbsentSha256, ErrConflict, sha("hello\n")},
		{"expected content, but missing", "missing.txt", wrong, ErrConflict, AbsentSha256},
		{"empty sha on an empty file", "empty.txt", sha(""), nil, ""},
		{"empty sha on a missing file", "missing.txt", sha(""), ErrConflict, AbsentSha256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(fx.root, tc.path)
			before, _ := os.ReadFile(p)
			_, err := fx.w.WriteFile(WriteOptions{Path: tc.path, Content: "written\n", ExpectedSha256: tc.expected})
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got := readString(t, p); got != "written\n" {
					t.Errorf("content %q", got)
				}
				return
			}
			pe := checkErr(t, "WriteFile", err, tc.want)
			if pe != nil {
				if diff := cmp.Diff([2]string{strings.ToLower(tc.expected), tc.actual}, [2]string{pe.Expected, pe.Actual}); diff != "" {
					t.Errorf("expected/actual mismatch (-want +got):\n%s", diff)
				}
			}
			after, _ := os.ReadFile(p)
			if string(after) != string(before) {
				t.Errorf("a conflicting write changed the file: %q -> %q", before, after)
			}
		})
	}
	noTemps(t, fx.root)
}

func TestWriteThroughInRootSymlink(t *testing.T) {
	fx := newFixture(t)
	mustSymlink(t, "hello.txt", filepath.Join(fx.root, "alias"))
	mustSymlink(t, filepath.Join(fx.root, "sub", "inner.txt"), filepath.Join(fx.root, "absalias"))
	mustSymlink(t, "sub/later.txt", filepath.Join(fx.root, "dangling-inside"))
	for _, tc := range []struct{ path, target string }{
		{"alias", "hello.txt"},
		{"absalias", "sub/inner.txt"},
		{"dangling-inside", "sub/later.txt"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			res, err := fx.w.WriteFile(WriteOptions{Path: tc.path, Content: "via " + tc.path})
			if err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(fx.root, tc.target)
			if res.Path != target {
				t.Errorf("result path %s, want %s", res.Path, target)
			}
			if got := readString(t, target); got != "via "+tc.path {
				t.Errorf("target content %q", got)
			}
			if m := mode(t, filepath.Join(fx.root, tc.path)); m&fs.ModeSymlink == 0 {
				t.Errorf("the link was replaced: mode %v", m)
			}
		})
	}
	fx.checkUntouched(t)
}

// TestWriteAtomic overwrites a 4 MiB file with alternating contents while a
// reader opens it by name: every read must see one whole version.
func TestWriteAtomic(t *testing.T) {
	fx := newFixture(t)
	const size = 4 << 20
	versions := []string{strings.Repeat("a", size), strings.Repeat("b", size)}
	p := filepath.Join(fx.root, "big.txt")
	mustWrite(t, p, versions[0])
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}

	const writes = 40
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for i := range writes {
			if _, err := fx.w.WriteFile(WriteOptions{Path: "big.txt", Content: versions[(i+1)%2]}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	reads := 0
	for i := 0; i < 100_000; i++ {
		select {
		case <-done:
			i = 100_000
			continue
		default:
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if s := string(b); s != versions[0] && s != versions[1] {
			t.Fatalf("read %d saw a partial file: %d bytes starting %q", i, len(b), b[:min(len(b), 8)])
		}
		reads++
	}
	wg.Wait()
	t.Logf("%d reads during %d writes", reads, writes)
	if m := mode(t, p); m != 0o600 {
		t.Errorf("mode %v, want 0600", m)
	}
	noTemps(t, fx.root)
}
