package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// This file drives readFile and writeFile through the binary for what the
// txtar scripts cannot hold: large files, FIFOs and sockets, concurrent
// readers of a file being rewritten, permission bits, artifacts of a real
// command, read roots and a root given as a symlink.

// TestWorkspaceDefaultMaxBytesAndPagingLargeFile writes a 1.6 MB file over
// the wire, then reads it: a whole read is over the default maxBytes
// (1 MiB) and answers -32006 with the size, the limit and a reason to page;
// pages with line and limit work anywhere in it.
func TestWorkspaceDefaultMaxBytesAndPagingLargeFile(t *testing.T) {
	t.Parallel()
	forEachFraming(t, func(t *testing.T, framing string) {
		s := start(t, options{framing: framing})
		s.initialize(nil)
		const lines = 16000
		var b strings.Builder
		for i := 1; i <= lines; i++ {
			fmt.Fprintf(&b, "%099d\n", i)
		}
		content := b.String()
		w, err := wsWriteFile(s, "big.txt", content, nil)
		if err != nil || w.Size != int64(len(content)) {
			t.Fatalf("writeFile big.txt = %+v, %v", w, err)
		}

		_, err = wsRead(s, "big.txt", nil)
		d := wsRefused(t, "readFile big.txt", err, wsCodeTooLarge, "big.txt")
		if d.Size != int64(len(content)) || d.Limit != 1<<20 {
			t.Errorf("data size/limit = %d/%d, want %d/%d", d.Size, d.Limit, len(content), 1<<20)
		}
		if !strings.Contains(d.Reason, "page with line and limit") {
			t.Errorf("reason %q does not say to page", d.Reason)
		}

		line := func(i int) string { return fmt.Sprintf("%099d\n", i) }
		for _, c := range []struct {
			name   string
			params map[string]any
			want   protocol.ReadFileResult
		}{
			{"near the end", map[string]any{"line": 15000, "limit": 3},
				protocol.ReadFileResult{Content: line(15000) + line(15001) + line(15002), StartLine: 15000, EndLine: 15002, TotalLines: lines, Truncated: true}},
			{"the last line", map[string]any{"line": lines, "limit": 5},
				protocol.ReadFileResult{Content: line(lines), StartLine: lines, EndLine: lines, TotalLines: lines}},
			{"past the end", map[string]any{"line": lines + 1},
				protocol.ReadFileResult{StartLine: lines + 1, EndLine: lines, TotalLines: lines}},
			// From line 2 to the end is paged: whole lines up to 1 MiB.
			{"from line 2", map[string]any{"line": 2},
				protocol.ReadFileResult{StartLine: 2, EndLine: 1 + (1<<20)/100, TotalLines: lines, Truncated: true}},
		} {
			t.Run(c.name, func(t *testing.T) {
				r, err := wsRead(s, "big.txt", c.params)
				if err != nil {
					t.Fatalf("readFile %v: %v", c.params, err)
				}
				c.want.Path, c.want.Encoding, c.want.Size = filepath.Join(s.root, "big.txt"), "utf-8", int64(len(content))
				if c.name == "from line 2" {
					c.want.Content = content[100 : 100*(c.want.EndLine)]
				}
				if diff := cmp.Diff(c.want, r, cmpopts.IgnoreFields(protocol.ReadFileResult{}, "MTime")); diff != "" {
					t.Errorf("readFile %v: mismatch (-want +got):\n%s", c.params, diff)
				}
			})
		}
	})
}

// TestWorkspaceSpecialFilesAreRefusedPromptly: a FIFO (directly or through
// an in-root symlink) and a socket are refused with -32602 saying what
// they are; the server does not block opening the FIFO (no writer ever
// comes), so the next request is answered.
func TestWorkspaceSpecialFilesAreRefusedPromptly(t *testing.T) {
	t.Parallel()
	forEachFraming(t, func(t *testing.T, framing string) {
		fx := newWSFixture(t)
		if err := syscall.Mkfifo(filepath.Join(fx.root, "fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		fx.symlink(t, "fifo", "pipe")
		ln, err := net.Listen("unix", filepath.Join(fx.root, "sock"))
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		s := fx.start(t, framing)
		for _, c := range []struct{ path, what string }{{"fifo", "a FIFO"}, {"pipe", "a FIFO"}, {"sock", "a socket"}} {
			_, err := wsRead(s, c.path, nil)
			d := wsRefused(t, "readFile "+c.path, err, wsCodeInvalidParams, c.path)
			if !strings.Contains(d.Reason, c.what) || d.Field != "path" {
				t.Errorf("readFile %s: data %+v, want field path and a reason saying it is %s", c.path, d, c.what)
			}
			_, err = wsWriteFile(s, c.path, "x\n", nil)
			d = wsRefused(t, "writeFile "+c.path, err, wsCodeInvalidParams, c.path)
			if !strings.Contains(d.Reason, c.what) {
				t.Errorf("writeFile %s: reason %q does not say it is %s", c.path, d.Reason, c.what)
			}
		}
		if r, err := wsRead(s, "hello.txt", nil); err != nil || r.Content != "hello\n" {
			t.Fatalf("readFile hello.txt after the FIFO: %+v, %v", r, err)
		}
		if fi, err := os.Lstat(filepath.Join(fx.root, "fifo")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
			t.Errorf("the FIFO was replaced: %v, %v", fi, err)
		}
	})
}

// TestWorkspaceWriteIsAtomicForReaders rewrites one file over and over with
// two contents of the same size while readFile requests run concurrently
// over the wire: every read returns one content or the other, whole, and
// no temporary file is left behind.
func TestWorkspaceWriteIsAtomicForReaders(t *testing.T) {
	t.Parallel()
	forEachFraming(t, func(t *testing.T, framing string) {
		s := start(t, options{framing: framing})
		s.initialize(nil)
		const size = 16 << 10
		contents := []string{strings.Repeat("a", size-1) + "\n", strings.Repeat("b", size-1) + "\n"}
		if _, err := wsWriteFile(s, "f.txt", contents[0], nil); err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for round := range 25 {
			// Each round sends two writes and eight reads before waiting for
			// any answer; the server runs them concurrently.
			var writes, reads []*client.Pending
			for i := range 10 {
				if i == 0 || i == 5 {
					writes = append(writes, s.request("writeFile", map[string]any{"path": "f.txt", "content": contents[(round+i/5)%2]}))
				} else {
					reads = append(reads, s.request("readFile", map[string]any{"path": "f.txt"}))
				}
			}
			for _, p := range writes {
				if e := s.answer(p, nil); e != nil {
					t.Fatalf("writeFile: %v", e)
				}
			}
			for _, p := range reads {
				var r protocol.ReadFileResult
				if e := s.answer(p, &r); e != nil {
					t.Fatalf("readFile: %v", e)
				}
				switch r.Content {
				case contents[0]:
					seen["a"]++
				case contents[1]:
					seen["b"]++
				default:
					t.Fatalf("a read saw a partial file: %d bytes starting %q", len(r.Content), r.Content[:min(len(r.Content), 16)])
				}
				if r.Size != size {
					t.Fatalf("a read reported size %d, want %d", r.Size, size)
				}
			}
		}
		t.Logf("reads by content: %v", seen)
		if seen["a"] == 0 || seen["b"] == 0 {
			t.Errorf("reads saw only one content (%v): the writes did not interleave with them", seen)
		}
		entries, err := os.ReadDir(s.root)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if diff := cmp.Diff([]string{"f.txt"}, names); diff != "" {
			t.Errorf("the root holds more than the file: mismatch (-want +got):\n%s", diff)
		}
	})
}

// TestWorkspaceWriteKeepsModeAndLinks: a replaced file keeps its permission
// bits, a new file is 0644 whatever the umask, and a write through an
// in-root symlink (dangling or not) writes the file it leads to and leaves
// the link.
func TestWorkspaceWriteKeepsModeAndLinks(t *testing.T) {
	t.Parallel()
	fx := newWSFixture(t)
	for name, mode := range map[string]os.FileMode{"private.txt": 0o600, "script.sh": 0o755, "odd.txt": 0o640} {
		wsWrite(t, filepath.Join(fx.root, name), "old\n")
		if err := os.Chmod(filepath.Join(fx.root, name), mode); err != nil {
			t.Fatal(err)
		}
	}
	fx.symlink(t, "script.sh", "run")
	fx.symlink(t, "sub/created.txt", "dangling") // in-root and dangling: the write creates its target
	s := fx.start(t, "")
	for _, c := range []struct {
		path, file string
		mode       os.FileMode
	}{{"private.txt", "private.txt", 0o600}, {"script.sh", "script.sh", 0o755}, {"odd.txt", "odd.txt", 0o640}, {"new.txt", "new.txt", 0o644}, {"run", "script.sh", 0o755}, {"dangling", "sub/created.txt", 0o644}} {
		w, err := wsWriteFile(s, c.path, "new content of "+c.path+"\n", nil)
		if err != nil {
			t.Fatalf("writeFile %s: %v", c.path, err)
		}
		if want := filepath.Join(fx.root, c.file); w.Path != want {
			t.Errorf("writeFile %s: path %s, want %s", c.path, w.Path, want)
		}
		fi, serr := os.Lstat(filepath.Join(fx.root, c.file))
		if serr != nil {
			t.Fatal(serr)
		}
		if fi.Mode() != c.mode {
			t.Errorf("after writeFile %s, %s has mode %v, want %v", c.path, c.file, fi.Mode(), c.mode)
		}
		if b, _ := os.ReadFile(filepath.Join(fx.root, c.file)); string(b) != "new content of "+c.path+"\n" {
			t.Errorf("after writeFile %s, %s holds %q", c.path, c.file, b)
		}
	}
	for link, want := range map[string]string{"run": "script.sh", "dangling": "sub/created.txt"} {
		if target, err := os.Readlink(filepath.Join(fx.root, link)); err != nil || target != want {
			t.Errorf("the symlink %s was not left as it was: %q, %v", link, target, err)
		}
	}
	fx.checkUntouched(t)
}

// TestWorkspaceReadsArtifactOfCommand: a runCommand's artifacts are
// readable with readFile at the paths it returns, pageable, and not
// writable (-32008).
func TestWorkspaceReadsArtifactOfCommand(t *testing.T) {
	t.Parallel()
	forEachFraming(t, func(t *testing.T, framing string) {
		s := start(t, options{framing: framing})
		s.initialize(nil)
		var res protocol.ToolResult
		s.mustCall("runCommand", map[string]any{"argv": []string{"sh", "-c", "for i in 1 2 3 4 5; do echo line $i; done"}}, &res)
		want := "line 1\nline 2\nline 3\nline 4\nline 5\n"
		for _, p := range []string{res.Artifacts.OutputPath, res.Artifacts.StdoutPath, "file://" + res.Artifacts.OutputPath} {
			r, err := wsRead(s, p, nil)
			if err != nil || r.Content != want || r.TotalLines != 5 {
				t.Errorf("readFile %s = %+v, %v; want the command's output", p, r, err)
			}
		}
		r, err := wsRead(s, res.Artifacts.OutputPath, map[string]any{"line": 4, "limit": 1})
		if err != nil || r.Content != "line 4\n" || !r.Truncated {
			t.Errorf("readFile line 4 of the output = %+v, %v", r, err)
		}
		_, err = wsWriteFile(s, res.Artifacts.OutputPath, "forged\n", nil)
		wsRefused(t, "writeFile of the output", err, wsCodeReadOnly, res.Artifacts.OutputPath)
		if b, _ := os.ReadFile(res.Artifacts.OutputPath); string(b) != want {
			t.Errorf("the output artifact now holds %q", b)
		}
	})
}

// wsReadRootsFixture adds parent/shared (lib.txt, sub/x.txt) to a fixture.
func wsReadRootsFixture(t *testing.T) (fx *wsFixture, shared string) {
	fx = newWSFixture(t)
	shared = filepath.Join(fx.parent, "shared")
	wsWrite(t, filepath.Join(shared, "lib.txt"), "lib\n")
	wsWrite(t, filepath.Join(shared, "sub", "x.txt"), "x\n")
	fx.before = fx.snapshot(t)
	return fx, shared
}

// TestWorkspaceReadRootFromCommandLine: a --read-root is readable by
// absolute path, by a file URI, by ".." from the root (it is a root of its
// own) and through an in-root symlink; every write into it is -32008.
func TestWorkspaceReadRootFromCommandLine(t *testing.T) {
	t.Parallel()
	fx, shared := wsReadRootsFixture(t)
	fx.symlink(t, filepath.Join(shared, "lib.txt"), "liblink")
	s := start(t, options{root: fx.root, args: []string{"--read-root", shared}})
	if rr := s.initialize(nil).Workspace.ReadRoots; !cmp.Equal(rr, []string{shared}) {
		t.Errorf("initialize readRoots = %q, want [%q]", rr, shared)
	}
	for _, p := range []string{filepath.Join(shared, "lib.txt"), "file://" + shared + "/lib.txt", "../shared/lib.txt", "liblink", fx.root + "/../shared/lib.txt"} {
		r, err := wsRead(s, p, nil)
		if err != nil || r.Content != "lib\n" || r.Path != filepath.Join(shared, "lib.txt") {
			t.Errorf("readFile %s = %+v, %v; want shared/lib.txt", p, r, err)
		}
		_, err = wsWriteFile(s, p, "PWNED\n", nil)
		wsRefused(t, "writeFile "+p, err, wsCodeReadOnly, p)
	}
	_, err := wsWriteFile(s, shared+"/new/x.txt", "PWNED\n", map[string]any{"createDirs": true})
	wsRefused(t, "writeFile with createDirs", err, wsCodeReadOnly, shared+"/new/x.txt")
	// The read root's siblings are still outside.
	_, err = wsRead(s, "../outside/secret.txt", nil)
	wsRefused(t, "readFile ../outside/secret.txt", err, wsCodeOutside, "../outside/secret.txt")
	fx.checkUntouched(t)
}

// TestWorkspaceReadRootsNarrowedByClient: initializationOptions.readRoots
// replaces the command line's read roots with narrower ones: what lies
// outside them is -32001 again. A read root inside the workspace root
// makes that part read-only (-32008) while the rest stays writable.
func TestWorkspaceReadRootsNarrowedByClient(t *testing.T) {
	t.Parallel()
	fx, shared := wsReadRootsFixture(t)
	wsWrite(t, filepath.Join(fx.root, "vendor", "dep.txt"), "dep\n")
	s := start(t, options{root: fx.root, args: []string{"--read-root", shared}})

	// Widening is refused, and the session can still initialize.
	err := s.call("initialize", map[string]any{"initializationOptions": map[string]any{"readRoots": []string{fx.outside}}}, nil)
	if err == nil || err.Code != wsCodeOutside {
		t.Fatalf("initialize with a read root outside: %v, want -32001", err)
	}
	vendor := filepath.Join(fx.root, "vendor")
	res := s.initialize(&protocol.InitializeParams{InitializationOptions: &protocol.InitializationOptions{ReadRoots: []string{"file://" + shared + "/sub", vendor}}})
	if rr := res.Workspace.ReadRoots; !cmp.Equal(rr, []string{filepath.Join(shared, "sub"), vendor}) {
		t.Errorf("initialize readRoots = %q, want [shared/sub, root/vendor]", rr)
	}
	if r, err := wsRead(s, filepath.Join(shared, "sub", "x.txt"), nil); err != nil || r.Content != "x\n" {
		t.Errorf("readFile shared/sub/x.txt = %+v, %v", r, err)
	}
	for _, p := range []string{filepath.Join(shared, "lib.txt"), "../shared/lib.txt", filepath.Join(shared, "sub", "..", "lib.txt")} {
		_, err := wsRead(s, p, nil)
		wsRefused(t, "readFile "+p, err, wsCodeOutside, p)
	}
	if r, err := wsRead(s, "vendor/dep.txt", nil); err != nil || r.Content != "dep\n" {
		t.Errorf("readFile vendor/dep.txt = %+v, %v", r, err)
	}
	for _, p := range []string{"vendor/dep.txt", "vendor/new.txt", vendor + "/new.txt"} {
		_, err := wsWriteFile(s, p, "PWNED\n", nil)
		wsRefused(t, "writeFile "+p, err, wsCodeReadOnly, p)
	}
	if _, err := wsWriteFile(s, "not-vendor.txt", "ok\n", nil); err != nil {
		t.Errorf("writeFile beside the nested read root: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(vendor, "dep.txt")); string(b) != "dep\n" {
		t.Errorf("vendor/dep.txt now holds %q", b)
	}
	if _, err := os.Stat(filepath.Join(vendor, "new.txt")); err == nil {
		t.Error("vendor/new.txt was written")
	}
	fx.checkUntouched(t)
}

// TestWorkspaceSymlinkedRoot: a --root given as a symlink is resolved once;
// results name real paths, the symlink's spelling is accepted in absolute
// paths and URIs, and escapes through it are still refused.
func TestWorkspaceSymlinkedRoot(t *testing.T) {
	t.Parallel()
	forEachFraming(t, func(t *testing.T, framing string) {
		fx := newWSFixture(t)
		link := filepath.Join(fx.parent, "link")
		if err := os.Symlink("root", link); err != nil {
			t.Fatal(err)
		}
		fx.before = fx.snapshot(t)
		s := start(t, options{framing: framing, noRoot: true, args: []string{"--root", link}})
		if root := s.initialize(nil).Workspace.Root; root != fx.root {
			t.Errorf("initialize root = %q, want the real path %q", root, fx.root)
		}
		for _, p := range []string{"hello.txt", link + "/hello.txt", "file://" + link + "/hello.txt", fx.root + "/hello.txt", link + "/sub/../hello.txt"} {
			r, err := wsRead(s, p, nil)
			if err != nil || r.Content != "hello\n" || r.Path != filepath.Join(fx.root, "hello.txt") {
				t.Errorf("readFile %s = %+v, %v; want root/hello.txt by its real path", p, r, err)
			}
		}
		w, err := wsWriteFile(s, link+"/sub/new.txt", "new\n", nil)
		if err != nil || w.Path != filepath.Join(fx.root, "sub", "new.txt") {
			t.Errorf("writeFile through the link's spelling = %+v, %v", w, err)
		}
		for _, p := range []string{link + "/../outside/secret.txt", link + "2/secret.txt", link + "/../root2/secret.txt"} {
			_, err := wsRead(s, p, nil)
			wsRefused(t, "readFile "+p, err, wsCodeOutside, p)
			_, err = wsWriteFile(s, p, "PWNED\n", nil)
			wsRefused(t, "writeFile "+p, err, wsCodeOutside, p)
		}
		fx.checkUntouched(t)
	})
}

// TestWorkspaceErrorDataFields checks that each workspace error's data
// carries its fields under the names clients read: path and reason always,
// size and limit for -32006, expected and actual for -32009.
func TestWorkspaceErrorDataFields(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	wsWrite(t, filepath.Join(s.root, "f.txt"), "0123456789\n")
	// Each request's error data is read as it was on the wire.
	decode := func(p *client.Pending) map[string]any {
		var m map[string]any
		if e := s.answer(p, nil); e == nil || json.Unmarshal(wireErrorData(t, s.response(wireID(p))), &m) != nil {
			t.Fatalf("no decodable error data: %v", e)
		}
		return m
	}
	keys := func(m map[string]any) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		return out
	}
	sorted := cmpopts.SortSlices(func(a, b string) bool { return a < b })
	if m := decode(s.request("readFile", map[string]any{"path": "f.txt", "maxBytes": 5})); !cmp.Equal(keys(m), []string{"path", "reason", "size", "limit"}, sorted) || m["size"] != 11.0 || m["limit"] != 5.0 {
		t.Errorf("-32006 data = %v, want path, reason, size 11, limit 5", m)
	}
	if m := decode(s.request("writeFile", map[string]any{"path": "f.txt", "content": "x", "expectedSha256": strings.Repeat("ab", 32)})); !cmp.Equal(keys(m), []string{"path", "reason", "expected", "actual"}, sorted) || m["expected"] != strings.Repeat("ab", 32) {
		t.Errorf("-32009 data = %v, want path, reason, expected, actual", m)
	}
	outside := s.request("readFile", map[string]any{"path": "../x"})
	if m := decode(outside); !cmp.Equal(keys(m), []string{"path", "reason"}, sorted) {
		t.Errorf("-32001 data = %v, want path and reason only", m)
	}
	if data := wireErrorData(t, s.response(wireID(outside))); !bytes.Contains(data, []byte(`"path":"../x"`)) {
		t.Errorf("-32001 data %s does not name the path as given", data)
	}
}

// TestWorkspacePermissionDeniedIsInternalError: when the operating system
// refuses access, readFile and writeFile answer -32603 with data {path,
// reason} saying so, and nothing is written. As root, permission bits are
// not enforced, so the directory is made immutable instead (chattr +i).
func TestWorkspacePermissionDeniedIsInternalError(t *testing.T) {
	t.Parallel()
	fx := newWSFixture(t)
	locked := filepath.Join(fx.root, "locked")
	wsWrite(t, filepath.Join(locked, "f.txt"), "locked\n")
	readDenied := false
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chattr", "+i", locked).CombinedOutput(); err != nil {
			t.Skipf("running as root and cannot make a directory immutable: %v %s", err, out)
		}
		t.Cleanup(func() { exec.Command("chattr", "-i", locked).Run() })
	} else {
		if err := os.Chmod(filepath.Join(locked, "f.txt"), 0); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(locked, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(locked, 0o755) })
		readDenied = true
	}
	s := fx.start(t, "")
	if readDenied {
		_, err := wsRead(s, "locked/f.txt", nil)
		if d := wsRefused(t, "readFile locked/f.txt", err, wsCodeInternal, "locked/f.txt"); !strings.Contains(d.Reason, "permission denied") {
			t.Errorf("reason %q does not say permission denied", d.Reason)
		}
	}
	for _, p := range []string{"locked/f.txt", "locked/new.txt"} {
		_, err := wsWriteFile(s, p, "PWNED\n", nil)
		d := wsRefused(t, "writeFile "+p, err, wsCodeInternal, p)
		t.Logf("writeFile %s: %s", p, d.Reason)
		if !strings.Contains(d.Reason, "not permitted") && !strings.Contains(d.Reason, "permission denied") {
			t.Errorf("writeFile %s: reason %q does not say permission was refused", p, d.Reason)
		}
	}
	entries, _ := os.ReadDir(locked)
	if len(entries) != 1 {
		t.Errorf("the locked directory holds %d entries, want only f.txt", len(entries))
	}
	fx.checkUntouched(t)
}
