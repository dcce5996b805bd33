package workspace

import (
	"encoding/base64"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestReadPaging(t *testing.T) {
	fx := newFixture(t)
	mustWrite(t, filepath.Join(fx.root, "five.txt"), "one\ntwo\nthree\nfour\nfive\n")
	mustWrite(t, filepath.Join(fx.root, "nonl.txt"), "a\nb")
	mustWrite(t, filepath.Join(fx.root, "empty.txt"), "")
	mustWrite(t, filepath.Join(fx.root, "utf8.txt"), "héllo wörld\nx\n")
	long := strings.Repeat("x", 100_000) + "\n"
	mustWrite(t, filepath.Join(fx.root, "long.txt"), long+"end\n")

	type want struct {
		Content           string
		Start, End, Total int
		Truncated         bool
		Size              int64
	}
	for _, tc := range []struct {
		name string
		o    ReadOptions
		want want
	}{
		{"whole", ReadOptions{Path: "five.txt"}, want{"one\ntwo\nthree\nfour\nfive\n", 1, 5, 5, false, 24}},
		{"line 1 is whole", ReadOptions{Path: "five.txt", Line: 1}, want{"one\ntwo\nthree\nfour\nfive\n", 1, 5, 5, false, 24}},
		{"middle", ReadOptions{Path: "five.txt", Line: 2, Limit: 2}, want{"two\nthree\n", 2, 3, 5, true, 24}},
		{"to the end", ReadOptions{Path: "five.txt", Line: 4}, want{"four\nfive\n", 4, 5, 5, false, 24}},
		{"limit past the end", ReadOptions{Path: "five.txt", Line: 5, Limit: 10}, want{"five\n", 5, 5, 5, false, 24}},
		{"first line", ReadOptions{Path: "five.txt", Limit: 1}, want{"one\n", 1, 1, 5, true, 24}},
		{"just past the end", ReadOptions{Path: "five.txt", Line: 6}, want{"", 6, 5, 5, false, 24}},
		{"far past the end", ReadOptions{Path: "five.txt", Line: 9, Limit: 2}, want{"", 9, 8, 5, false, 24}},
		{"whole lines within maxBytes", ReadOptions{Path: "five.txt", Limit: 3, MaxBytes: 9}, want{"one\ntwo\n", 1, 2, 5, true, 24}},
		{"exactly maxBytes", ReadOptions{Path: "five.txt", Line: 2, MaxBytes: 10}, want{"two\nthree\n", 2, 3, 5, true, 24}},
		{"first line cut", ReadOptions{Path: "five.txt", Line: 3, Limit: 1, MaxBytes: 3}, want{"thr", 3, 3, 5, true, 24}},
		{"cut at a rune boundary", ReadOptions{Path: "utf8.txt", Limit: 1, MaxBytes: 2}, want{"h", 1, 1, 2, true, 16}},
		{"no final newline", ReadOptions{Path: "nonl.txt"}, want{"a\nb", 1, 2, 2, false, 3}},
		{"last line without newline", ReadOptions{Path: "nonl.txt", Line: 2}, want{"b", 2, 2, 2, false, 3}},
		{"empty", ReadOptions{Path: "empty.txt"}, want{"", 1, 0, 0, false, 0}},
		{"line after a long line", ReadOptions{Path: "long.txt", Line: 2, Limit: 1}, want{"end\n", 2, 2, 2, false, int64(len(long) + 4)}},
		{"long line", ReadOptions{Path: "long.txt", Limit: 1}, want{long, 1, 1, 2, true, int64(len(long) + 4)}},
		{"long line dropped", ReadOptions{Path: "long.txt", Line: 2, Limit: 1, MaxBytes: 2}, want{"en", 2, 2, 2, true, int64(len(long) + 4)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := fx.w.ReadFile(tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Encoding != "utf-8" {
				t.Errorf("encoding %q, want utf-8", res.Encoding)
			}
			got := want{res.Content, res.StartLine, res.EndLine, res.TotalLines, res.Truncated, res.Size}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadTooLarge(t *testing.T) {
	fx := newFixture(t)
	mustWrite(t, filepath.Join(fx.root, "five.txt"), "one\ntwo\nthree\nfour\nfive\n")
	_, err := fx.w.ReadFile(ReadOptions{Path: "five.txt", MaxBytes: 10})
	pe := checkErr(t, "ReadFile", err, ErrTooLarge)
	if pe == nil {
		return
	}
	if diff := cmp.Diff([2]int64{24, 10}, [2]int64{pe.Size, pe.Limit}); diff != "" {
		t.Errorf("size, limit mismatch (-want +got):\n%s", diff)
	}
	if !strings.Contains(pe.Reason, "line and limit") {
		t.Errorf("reason %q does not tell the client to page", pe.Reason)
	}
	// Default limit: 1 MiB.
	mustWrite(t, filepath.Join(fx.root, "big.txt"), strings.Repeat("y", int(DefaultMaxBytes)+1))
	_, err = fx.w.ReadFile(ReadOptions{Path: "big.txt"})
	if pe := checkErr(t, "ReadFile(big)", err, ErrTooLarge); pe != nil && pe.Limit != DefaultMaxBytes {
		t.Errorf("limit %d, want %d", pe.Limit, DefaultMaxBytes)
	}
}

func TestReadBinary(t *testing.T) {
	fx := newFixture(t)
	mustWrite(t, filepath.Join(fx.root, "mixed.bin"), "text\n\x00bin\n\xff\xfe\n")
	for _, tc := range []struct {
		name     string
		o        ReadOptions
		encoding string
		raw      string
	}{
		{"text page of a binary file", ReadOptions{Path: "mixed.bin", Limit: 1}, "utf-8", "text\n"},
		{"NUL", ReadOptions{Path: "mixed.bin", Line: 2, Limit: 1}, "base64", "\x00bin\n"},
		{"invalid UTF-8", ReadOptions{Path: "mixed.bin", Line: 3}, "base64", "\xff\xfe\n"},
		{"whole", ReadOptions{Path: "mixed.bin"}, "base64", "text\n\x00bin\n\xff\xfe\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := fx.w.ReadFile(tc.o)
			if err != nil {
				t.Fatal(err)
			}
			raw := res.Content
			if res.Encoding == "base64" {
				b, err := base64.StdEncoding.DecodeString(res.Content)
				if err != nil {
					t.Fatal(err)
				}
				raw = string(b)
			}
			if diff := cmp.Diff([2]string{tc.encoding, tc.raw}, [2]string{res.Encoding, raw}); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadResultPathAndMTime(t *testing.T) {
	fx := newFixture(t)
	mustSymlink(t, "hello.txt", filepath.Join(fx.root, "alias"))
	mustSymlink(t, filepath.Join(fx.root, "sub"), filepath.Join(fx.root, "abssub")) // absolute, but inside
	mustSymlink(t, "sub", filepath.Join(fx.root, "insub"))
	st, err := os.Stat(filepath.Join(fx.root, "hello.txt"))
	if err != nil {
		t.Fatal(err)
	}
	hello := filepath.Join(fx.root, "hello.txt")
	inner := filepath.Join(fx.root, "sub", "inner.txt")
	for _, tc := range []struct{ path, want string }{
		{"hello.txt", hello},
		{"./hello.txt", hello},
		{"sub/../hello.txt", hello},
		{"alias", hello},
		{"insub/../hello.txt", hello}, // insub is root/sub, so ".." is the root
		{"insub/inner.txt", inner},
		{"abssub/inner.txt", inner},
		{hello, hello},
		{fx.root + "//sub/./inner.txt", inner},
		{"file://" + hello, hello},
		{"file://localhost" + hello, hello},
		{"file://" + strings.ReplaceAll(hello, "hello", "%68ello"), hello},
	} {
		t.Run(tc.path, func(t *testing.T) {
			res, err := fx.w.ReadFile(ReadOptions{Path: tc.path})
			if err != nil {
				t.Fatal(err)
			}
			if res.Path != tc.want {
				t.Errorf("path %s, want %s", res.Path, tc.want)
			}
			if tc.want == hello && (!res.MTime.Equal(st.ModTime()) || res.Content != "hello\n") {
				t.Errorf("got %q mtime %v, want %q mtime %v", res.Content, res.MTime, "hello\n", st.ModTime())
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	fx := newFixture(t)
	mustSymlink(t, "nowhere", filepath.Join(fx.root, "dangling"))
	mustSymlink(t, "loop2", filepath.Join(fx.root, "loop1"))
	mustSymlink(t, "loop1", filepath.Join(fx.root, "loop2"))
	for _, tc := range []struct {
		o    ReadOptions
		want error
	}{
		{ReadOptions{Path: ""}, ErrInvalid},
		{ReadOptions{Path: "hello.txt", Line: -1}, ErrInvalid},
		{ReadOptions{Path: "hello.txt", Limit: -1}, ErrInvalid},
		{ReadOptions{Path: "hello.txt", MaxBytes: -1}, ErrInvalid},
		{ReadOptions{Path: "missing.txt"}, ErrNotFound},
		{ReadOptions{Path: "missing/x.txt"}, ErrNotFound},
		{ReadOptions{Path: "hello.txt/x"}, ErrNotFound},
		{ReadOptions{Path: "hello.txt/"}, ErrNotFound},
		{ReadOptions{Path: "dangling"}, ErrNotFound},
		{ReadOptions{Path: "loop1"}, ErrInvalid},
		{ReadOptions{Path: strings.Repeat("n", 300)}, ErrInvalid}, // over NAME_MAX; found by FuzzResolve
		{ReadOptions{Path: "sub"}, ErrNotRegular},
		{ReadOptions{Path: "."}, ErrNotRegular},
		{ReadOptions{Path: fx.root}, ErrNotRegular},
		{ReadOptions{Path: "file:relative.txt"}, ErrInvalid},
		{ReadOptions{Path: "file://" + fx.root + "/hello.txt#frag"}, ErrInvalid},
		{ReadOptions{Path: "file://" + fx.root + "/hello.txt?q"}, ErrInvalid},
		{ReadOptions{Path: "file://" + fx.root + "/%zz"}, ErrInvalid},
	} {
		t.Run(tc.o.Path, func(t *testing.T) {
			_, err := fx.w.ReadFile(tc.o)
			checkErr(t, "ReadFile", err, tc.want)
		})
	}
}

// readPromptly runs ReadFile in a goroutine and fails the test if it has not
// returned within a generous bound: a FIFO opened without O_NONBLOCK would
// block for ever. The select waits on the result; the timer is only a
// watchdog so that a regression fails instead of hanging.
func readPromptly(t *testing.T, w *Workspace, path string) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		_, err := w.ReadFile(ReadOptions{Path: path})
		errc <- err
	}()
	select {
	case err := <-errc:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("ReadFile(%q) blocked", path)
		return nil
	}
}

func TestReadSocket(t *testing.T) {
	fx := newFixture(t)
	sock := filepath.Join(fx.root, "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("unix socket: %v", err)
	}
	defer l.Close()
	err = readPromptly(t, fx.w, "s")
	if pe := checkErr(t, "ReadFile", err, ErrNotRegular); pe != nil && !strings.Contains(pe.Reason, "socket") {
		t.Errorf("reason %q does not say socket", pe.Reason)
	}
}

// TestReadStreams reads one line of a 32 MiB file and checks that far less
// than the file was allocated.
func TestReadStreams(t *testing.T) {
	fx := newFixture(t)
	line := strings.Repeat("z", 1023) + "\n"
	const lines = 32 << 10
	f, err := os.Create(filepath.Join(fx.root, "huge.txt"))
	if err != nil {
		t.Fatal(err)
	}
	block := strings.Repeat(line, 1024)
	for range lines / 1024 {
		if _, err := f.WriteString(block); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err := fx.w.ReadFile(ReadOptions{Path: "huge.txt", Line: 100, Limit: 2})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([4]int{100, 101, lines, 2048}, [4]int{res.StartLine, res.EndLine, res.TotalLines, len(res.Content)}); diff != "" {
		t.Errorf("start, end, total, len mismatch (-want +got):\n%s", diff)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("reading 2 lines of a %d-byte file allocated %d bytes", lines*len(line), alloc)
	}
}

func TestReadHardLink(t *testing.T) {
	fx := newFixture(t)
	hl := filepath.Join(fx.root, "hl")
	if err := os.Link(filepath.Join(fx.root, "hello.txt"), hl); err != nil {
		t.Skipf("link: %v", err)
	}
	res, err := fx.w.ReadFile(ReadOptions{Path: "hl"})
	if err != nil || res.Content != "hello\n" {
		t.Fatalf("ReadFile(hl) = %v, %v; want the linked content", res, err)
	}
	// As documented: a write replaces the directory entry, so the other name
	// keeps the old content.
	if _, err := fx.w.WriteFile(WriteOptions{Path: "hl", Content: "new\n"}); err != nil {
		t.Fatal(err)
	}
	got := [2]string{readString(t, hl), readString(t, filepath.Join(fx.root, "hello.txt"))}
	if diff := cmp.Diff([2]string{"new\n", "hello\n"}, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func readString(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// BenchmarkReadFile4K reads a 4 KiB file of 64 lines whole, as the bench
// program's readFile figure does, so the in-process share of that figure
// can be compared with os.ReadFile:
//
//	go test ./workspace -run '^$' -bench 'ReadFile|OSReadFile'
func BenchmarkReadFile4K(b *testing.B) {
	fx := newFixture(b)
	mustWrite(b, filepath.Join(fx.root, "4k.txt"), strings.Repeat(strings.Repeat("y", 63)+"\n", 64))
	for b.Loop() {
		res, err := fx.w.ReadFile(ReadOptions{Path: "4k.txt"})
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Content) != 4096 {
			b.Fatalf("read %d bytes", len(res.Content))
		}
	}
}

// BenchmarkOSReadFile4K is BenchmarkReadFile4K's baseline.
func BenchmarkOSReadFile4K(b *testing.B) {
	fx := newFixture(b)
	p := filepath.Join(fx.root, "4k.txt")
	mustWrite(b, p, strings.Repeat(strings.Repeat("y", 63)+"\n", 64))
	for b.Loop() {
		if _, err := os.ReadFile(p); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReadWholeMatchesScan checks that the whole-file path gives what the
// line scanner gives for the same bytes.
func TestReadWholeMatchesScan(t *testing.T) {
	for _, content := range []string{
		"", "a", "\n", "a\n", "a\nb", "a\nb\n", "\n\n\n", "a\r\nb\r\n",
		strings.Repeat("x", 4095) + "\n", strings.Repeat("line\n", 20000), strings.Repeat("y", 70000),
	} {
		for _, maxBytes := range []int64{1, 4, int64(len(content)) - 1, int64(len(content)), int64(len(content)) + 1, DefaultMaxBytes} {
			if maxBytes <= 0 {
				continue
			}
			for _, size := range []int64{int64(len(content)), 0, int64(len(content)) / 2} { // the size at open: right, or the file grew since
				want, werr := scan(strings.NewReader(content), size, 1, 0, maxBytes, true)
				got, gerr := readWhole(strings.NewReader(content), size, maxBytes)
				if (werr != nil) != (gerr != nil) {
					t.Fatalf("%d bytes, maxBytes %d: readWhole err %v, scan err %v", len(content), maxBytes, gerr, werr)
				}
				if got.tooLarge != want.tooLarge {
					t.Fatalf("%d bytes, maxBytes %d, size %d: readWhole tooLarge %v, scan %v", len(content), maxBytes, size, got.tooLarge, want.tooLarge)
				}
				if got.tooLarge {
					if got.seen <= maxBytes {
						t.Fatalf("%d bytes, maxBytes %d: tooLarge after %d bytes", len(content), maxBytes, got.seen)
					}
					continue
				}
				if string(got.content) != string(want.content) || got.start != want.start || got.end != want.end || got.total != want.total || got.cut != want.cut {
					t.Fatalf("%d bytes, maxBytes %d, size %d: readWhole = %d bytes, lines %d-%d of %d, cut %v; scan = %d bytes, lines %d-%d of %d, cut %v",
						len(content), maxBytes, size, len(got.content), got.start, got.end, got.total, got.cut, len(want.content), want.start, want.end, want.total, want.cut)
				}
			}
		}
	}
}
