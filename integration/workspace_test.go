package integration

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

// This file drives the escape corpus of issue 3 through the binary: every
// path is refused by readFile and by writeFile with -32001 and data {path,
// reason}, and nothing outside the root is read (no content comes back) or
// written (a snapshot of everything beside the root is unchanged).

// Wire error codes of the workspace methods (BRIEF.md, "Errors").
const (
	wsCodeInvalidParams = -32602
	wsCodeInternal      = -32603
	wsCodeOutside       = -32001
	wsCodeNotFound      = -32003
	wsCodeTooLarge      = -32006
	wsCodeReadOnly      = -32008
	wsCodeConflict      = -32009
)

// wsSecret is the content of every file an escape would reach; no answer
// may ever contain it.
const wsSecret = "SECRET outside the root\n"

// wsSiblings are directories beside the root whose names start with the
// root's name (or differ from it only in case).
var wsSiblings = []string{"root_evil", "root2", "root.bak", "root-old", "Root"}

// wsFixture is a parent directory holding the root and, beside it,
// everything an escape would reach:
//
//	parent/root/hello.txt, root/sub/inner.txt   the workspace
//	parent/outside/secret.txt, outside/dir/...  files outside
//	parent/<sibling>/secret.txt                 siblings sharing the root's prefix
type wsFixture struct {
	parent, root, outside string
	before                map[string]string // snapshot of parent without root
}

// newWSFixture lays the fixture out in a new temporary directory.
func newWSFixture(t *testing.T) *wsFixture {
	t.Helper()
	parent, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fx := &wsFixture{parent: parent, root: filepath.Join(parent, "root"), outside: filepath.Join(parent, "outside")}
	wsWrite(t, filepath.Join(fx.root, "hello.txt"), "hello\n")
	wsWrite(t, filepath.Join(fx.root, "sub", "inner.txt"), "inner\n")
	wsWrite(t, filepath.Join(fx.outside, "secret.txt"), wsSecret)
	wsWrite(t, filepath.Join(fx.outside, "dir", "secret.txt"), wsSecret)
	wsWrite(t, filepath.Join(fx.outside, "dir", "file.txt"), wsSecret)
	for _, s := range wsSiblings {
		wsWrite(t, filepath.Join(parent, s, "secret.txt"), wsSecret)
		wsWrite(t, filepath.Join(parent, s, "hello.txt"), wsSecret)
	}
	fx.before = fx.snapshot(t)
	return fx
}

// start starts the binary on the fixture's root and initializes it.
func (fx *wsFixture) start(t *testing.T, framing string, args ...string) *server {
	t.Helper()
	s := start(t, options{framing: framing, root: fx.root, args: args})
	s.initialize(nil)
	return s
}

// snapshot describes every entry under parent except the root's subtree:
// its type and permission bits, and a file's content or a link's target.
func (fx *wsFixture) snapshot(t *testing.T) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(fx.parent, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == fx.root {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := fi.Mode().String()
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + target
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " " + string(b)
		}
		snap[p] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// checkUntouched fails the test if anything beside the root changed since
// the fixture was laid out (or last re-snapshotted).
func (fx *wsFixture) checkUntouched(t *testing.T) {
	t.Helper()
	if diff := cmp.Diff(fx.before, fx.snapshot(t)); diff != "" {
		t.Errorf("outside the root changed: mismatch (-want +got):\n%s", diff)
	}
}

// symlink makes a symlink at root/name to target, creating root/name's
// parent directories.
func (fx *wsFixture) symlink(t *testing.T, target, name string) {
	t.Helper()
	p := filepath.Join(fx.root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// wsWrite writes content to p, creating its parents.
func wsWrite(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// wsRefused checks that err is an error answer with code whose data names
// path and gives a reason, and returns the data.
func wsRefused(t *testing.T, what string, err *protocol.Error, code int, path string) protocol.ErrorData {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded, want error %d", what, code)
	}
	d := errData(err)
	data, _ := json.Marshal(err.Data)
	if err.Code != code {
		t.Fatalf("%s: error %d %q (data %s), want %d", what, err.Code, err.Message, data, code)
	}
	if d.Path != path {
		t.Errorf("%s: data.path = %q, want %q", what, d.Path, path)
	}
	if d.Reason == "" {
		t.Errorf("%s: data has no reason: %s", what, data)
	}
	if strings.Contains(err.Message+string(data), strings.TrimSpace(wsSecret)) {
		t.Errorf("%s: the error carries outside content: %s %s", what, err.Message, data)
	}
	return d
}

// wsRead calls readFile with path and more params.
func wsRead(s *server, path string, more map[string]any) (protocol.ReadFileResult, *protocol.Error) {
	s.t.Helper()
	params := map[string]any{"path": path}
	for k, v := range more {
		params[k] = v
	}
	var r protocol.ReadFileResult
	err := s.call("readFile", params, &r)
	return r, err
}

// wsWriteFile calls writeFile with path, content and more params.
func wsWriteFile(s *server, path, content string, more map[string]any) (protocol.WriteFileResult, *protocol.Error) {
	s.t.Helper()
	params := map[string]any{"path": path, "content": content}
	for k, v := range more {
		params[k] = v
	}
	var r protocol.WriteFileResult
	err := s.call("writeFile", params, &r)
	return r, err
}

// wsEscape runs one entry of the escape corpus in both framings: on a new
// fixture, after setup, every path from paths is refused by readFile and by
// writeFile (with createDirs) with -32001, and nothing beside the root
// changes. Symlinks that setup made inside the root stay as they were.
func wsEscape(t *testing.T, setup func(t *testing.T, fx *wsFixture), paths func(fx *wsFixture) []string) {
	t.Helper()
	forEachFraming(t, func(t *testing.T, framing string) {
		fx := newWSFixture(t)
		if setup != nil {
			setup(t, fx)
		}
		fx.before = fx.snapshot(t)
		links := map[string]string{}
		filepath.WalkDir(fx.root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type()&fs.ModeSymlink != 0 {
				links[p], _ = os.Readlink(p)
			}
			return nil
		})
		s := fx.start(t, framing)
		for _, p := range paths(fx) {
			name := strings.ReplaceAll(strings.ReplaceAll(p, fx.parent, "<parent>"), "\x00", "<NUL>")
			if len(name) > 80 {
				name = name[:40] + "…" + name[len(name)-20:]
			}
			t.Run(name, func(t *testing.T) {
				_, err := wsRead(s, p, nil)
				wsRefused(t, "readFile", err, wsCodeOutside, p)
				_, err = wsWriteFile(s, p, "PWNED\n", map[string]any{"createDirs": true})
				wsRefused(t, "writeFile", err, wsCodeOutside, p)
			})
		}
		fx.checkUntouched(t)
		for p, target := range links {
			if got, err := os.Readlink(p); err != nil || got != target {
				t.Errorf("symlink %s now reads %q, %v; want it left pointing to %q", p, got, err, target)
			}
		}
		// The session goes on: an ordinary read is answered.
		if r, err := wsRead(s, "hello.txt", nil); err != nil || r.Content != "hello\n" {
			t.Errorf("readFile hello.txt after the corpus: %+v, %v", r, err)
		}
	})
}

func TestWorkspaceEscapeDotDot(t *testing.T) {
	t.Parallel()
	wsEscape(t, nil, func(fx *wsFixture) []string {
		return []string{
			"..",
			"../",
			"../outside/secret.txt",
			"sub/../../outside/secret.txt",
			"../root/../outside/secret.txt",
			"./../outside/new.txt",
			"../outside/newdir/new.txt",
			"sub/../../../../../../../../etc/passwd",
			fx.root + "/../outside/secret.txt",
			fx.root + "/sub/../../outside/new.txt",
		}
	})
}

func TestWorkspaceEscapeAbsoluteOutside(t *testing.T) {
	t.Parallel()
	wsEscape(t, nil, func(fx *wsFixture) []string {
		return []string{
			filepath.Join(fx.outside, "secret.txt"),
			filepath.Join(fx.outside, "new.txt"),
			filepath.Join(fx.outside, "newdir", "new.txt"),
			fx.parent,
			fx.outside,
			"/",
			"/etc/passwd",
			"//etc/passwd",
		}
	})
}

func TestWorkspaceEscapeSiblingPrefix(t *testing.T) {
	t.Parallel()
	wsEscape(t, nil, func(fx *wsFixture) []string {
		var out []string
		for _, s := range wsSiblings[:4] {
			sib := filepath.Join(fx.parent, s)
			out = append(out, sib, sib+"/secret.txt", sib+"/hello.txt", sib+"/new.txt", fx.root+"/../"+s+"/secret.txt", "../"+s+"/hello.txt")
		}
		return out
	})
}

func TestWorkspaceEscapeSymlinkToFileOutside(t *testing.T) {
	t.Parallel()
	wsEscape(t, func(t *testing.T, fx *wsFixture) {
		fx.symlink(t, filepath.Join(fx.outside, "secret.txt"), "leak")
		fx.symlink(t, "../outside/secret.txt", "leakrel")
		fx.symlink(t, "leak", "chain") // an in-root link to a link that leads out
		fx.symlink(t, "../../outside/secret.txt", "sub/leakdeep")
	}, func(fx *wsFixture) []string {
		return []string{"leak", "leakrel", "chain", "sub/leakdeep", filepath.Join(fx.root, "leak"), "sub/../leak", "file://" + fx.root + "/leak"}
	})
}

func TestWorkspaceEscapeSymlinkToDirOutside(t *testing.T) {
	t.Parallel()
	wsEscape(t, func(t *testing.T, fx *wsFixture) {
		fx.symlink(t, fx.outside, "out")
		fx.symlink(t, "../outside", "outrel")
		fx.symlink(t, filepath.Join(fx.outside, "dir"), "sub/deep")
	}, func(fx *wsFixture) []string {
		return []string{
			"out", "out/secret.txt", "out/dir/file.txt", "out/new.txt", "out/newdir/new.txt",
			"outrel/secret.txt", "outrel/dir/secret.txt", "outrel/new.txt",
			"sub/deep/file.txt", "sub/deep/new.txt",
			filepath.Join(fx.root, "out", "secret.txt"),
			filepath.Join(fx.root, "out", "new.txt"),
		}
	})
}

func TestWorkspaceEscapeDanglingSymlink(t *testing.T) {
	t.Parallel()
	wsEscape(t, func(t *testing.T, fx *wsFixture) {
		fx.symlink(t, filepath.Join(fx.outside, "new.txt"), "dangle")
		fx.symlink(t, "../outside/new.txt", "danglerel")
		fx.symlink(t, filepath.Join(fx.outside, "nodir"), "dangledir")
		fx.symlink(t, filepath.Join(fx.parent, "root2", "new.txt"), "danglesib")
	}, func(fx *wsFixture) []string {
		return []string{"dangle", "danglerel", "dangledir/new.txt", "danglesib", filepath.Join(fx.root, "dangle")}
	})
}

// TestWorkspaceEscapeLinkDotDot: for the kernel "link/../secret.txt" is
// outside/secret.txt, since link is a directory outside; a lexical clean
// would make it root/secret.txt, which exists here, and wrongly allow it.
func TestWorkspaceEscapeLinkDotDot(t *testing.T) {
	t.Parallel()
	wsEscape(t, func(t *testing.T, fx *wsFixture) {
		fx.symlink(t, filepath.Join(fx.outside, "dir"), "link")
		wsWrite(t, filepath.Join(fx.root, "secret.txt"), "inside\n")
	}, func(fx *wsFixture) []string {
		return []string{"link/../secret.txt", "link/..", filepath.Join(fx.root, "link") + "/../secret.txt", "sub/../link/../secret.txt"}
	})
}

func TestWorkspaceEscapeNULByte(t *testing.T) {
	t.Parallel()
	wsEscape(t, nil, func(fx *wsFixture) []string {
		return []string{"hello.txt\x00", "\x00", "hello.txt\x00../../outside/secret.txt", filepath.Join(fx.outside, "secret.txt") + "\x00", "file://" + fx.root + "/hello.txt%00"}
	})
}

// TestWorkspaceEscapeLongPath: a path of PATH_MAX (4096) bytes or more is
// refused before the filesystem sees it, even when it would lead inside.
func TestWorkspaceEscapeLongPath(t *testing.T) {
	t.Parallel()
	wsEscape(t, nil, func(fx *wsFixture) []string {
		rel := strings.Repeat("./", 2048) + "hello.txt"
		return []string{
			rel,
			fx.root + "/" + rel,
			"file://" + fx.root + "/" + rel,
			strings.Repeat("sub/../", 600) + "../outside/secret.txt",
		}
	})
}

func TestWorkspaceEscapeProcSelf(t *testing.T) {
	t.Parallel()
	wsEscape(t, nil, func(fx *wsFixture) []string {
		return []string{
			"/proc/self/root" + filepath.Join(fx.outside, "secret.txt"),
			"/proc/self/root" + filepath.Join(fx.root, "hello.txt"), // even when it would land inside
			"/proc/self/cwd/hello.txt",
			"/proc/self/cwd/../outside/secret.txt",
			"/proc/thread-self/root/etc/passwd",
			"/proc/self/fd/0",
			"//proc/self/root/etc/passwd",
			"file:///proc/self/root" + filepath.Join(fx.outside, "secret.txt"),
		}
	})
}

func TestWorkspaceEscapeTilde(t *testing.T) {
	t.Parallel()
	wsEscape(t, func(t *testing.T, fx *wsFixture) {
		// A directory literally named "~" in the root must not make "~"
		// work as a home expansion either.
		wsWrite(t, filepath.Join(fx.root, "~", "x"), "tilde\n")
	}, func(fx *wsFixture) []string {
		return []string{"~", "~/", "~/x", "~root/.bashrc", "~/../outside/secret.txt"}
	})
}

func TestWorkspaceEscapeFileURIOutside(t *testing.T) {
	t.Parallel()
	wsEscape(t, nil, func(fx *wsFixture) []string {
		u := func(p string) string { return (&url.URL{Scheme: "file", Path: p}).String() }
		return []string{
			u(filepath.Join(fx.outside, "secret.txt")),
			u(filepath.Join(fx.outside, "new.txt")),
			"file://localhost" + filepath.Join(fx.outside, "secret.txt"),
			"FILE://" + filepath.Join(fx.outside, "secret.txt"),
			"file://" + fx.root + "/%2e%2e/outside/secret.txt",
			"file://" + fx.root + "/..%2Foutside%2Fsecret.txt",
			"file://" + fx.parent + "/root%5Fevil/secret.txt",
			u(filepath.Join(fx.parent, "root2", "secret.txt")),
			"file://evil.example.com" + filepath.Join(fx.root, "hello.txt"),
		}
	})
}

// TestWorkspaceEscapeCaseVariant: parent/Root exists beside parent/root; on
// a case-sensitive filesystem it is another directory, and it is never
// taken for the root.
func TestWorkspaceEscapeCaseVariant(t *testing.T) {
	t.Parallel()
	wsEscape(t, nil, func(fx *wsFixture) []string {
		// The test's temporary directory has letters in its name: flip
		// the case of that ancestor of the root.
		gp := filepath.Dir(fx.parent)
		flipped := []byte(filepath.Base(gp))
		flipped[0] ^= 0x20
		ancestor := filepath.Join(filepath.Dir(gp), string(flipped), filepath.Base(fx.parent), "root", "hello.txt")
		return []string{
			strings.ToUpper(fx.root) + "/hello.txt",
			filepath.Join(fx.parent, "Root", "secret.txt"),
			filepath.Join(fx.parent, "Root", "hello.txt"),
			filepath.Join(fx.parent, "ROOT", "hello.txt"),
			ancestor,
			"file://" + filepath.Join(fx.parent, "Root", "hello.txt"),
			"../Root/hello.txt",
		}
	})
}

// TestWorkspaceHardLinkIsTheSameFile documents what no path check can see:
// a hard link inside the root to a file outside is that file, so readFile
// reads it; writeFile replaces the directory entry, so the outside name
// keeps its old content.
func TestWorkspaceHardLinkIsTheSameFile(t *testing.T) {
	t.Parallel()
	fx := newWSFixture(t)
	if err := os.Link(filepath.Join(fx.outside, "secret.txt"), filepath.Join(fx.root, "hard.txt")); err != nil {
		t.Skipf("cannot make a hard link here: %v", err)
	}
	s := fx.start(t, "")
	r, err := wsRead(s, "hard.txt", nil)
	if err != nil || r.Content != wsSecret || r.Path != filepath.Join(fx.root, "hard.txt") {
		t.Fatalf("readFile hard.txt = %+v, %v; want the linked file's content under the root's name", r, err)
	}
	if _, err := wsWriteFile(s, "hard.txt", "replaced\n", nil); err != nil {
		t.Fatalf("writeFile hard.txt: %v", err)
	}
	fx.checkUntouched(t)
	if b, err := os.ReadFile(filepath.Join(fx.root, "hard.txt")); err != nil || string(b) != "replaced\n" {
		t.Errorf("root/hard.txt after the write: %q, %v", b, err)
	}
}

// wsCodes counts wire outcomes by code (0 for success), for logs.
type wsCodes map[int]int

// String lists the counts as code:n pairs.
func (c wsCodes) String() string {
	var parts []string
	for code, n := range c {
		parts = append(parts, fmt.Sprintf("%d:%d", code, n))
	}
	return strings.Join(parts, " ")
}
