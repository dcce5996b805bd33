package rpc

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

func TestParseFirst(t *testing.T) {
	const init = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"rootUri":"file:///w"}}`
	header := "Content-Length: 79\r\n\r\n" + init
	for _, c := range []struct {
		name, in, body, framing string
		broken                  bool
	}{
		{name: "nothing", in: " \r\n"},
		{name: "a line", in: "\n " + init + "\n{", body: init, framing: FramingNDJSON},
		{name: "a last line that is whole JSON", in: init, body: init, framing: FramingNDJSON},
		{name: "half a line", in: init[:40], framing: FramingNDJSON},
		{name: "a line that is not JSON", in: "{not json\n", body: "{not json", framing: FramingNDJSON},
		{name: "a header frame", in: header + "Content-Length: 2\r\n", body: init, framing: FramingHeader},
		{name: "a header frame in lower case", in: "content-length: 79\r\n\r\n" + init, body: init, framing: FramingHeader},
		{name: "half a header", in: "Content-Len", framing: FramingHeader},
		{name: "half a body", in: header[:len(header)-1], framing: FramingHeader},
		{name: "a body longer than what came", in: "Content-Length: 999999999999\r\n\r\n{}", framing: FramingHeader},
		{name: "no Content-Length", in: "Content-Type: x\r\n\r\n{}", framing: FramingHeader, broken: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := ParseFirst([]byte(c.in))
			got := struct {
				Body, Framing string
				Broken        bool
			}{string(m.Body), m.Framing, m.broken}
			want := struct {
				Body, Framing string
				Broken        bool
			}{c.body, c.framing, c.broken}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("ParseFirst(%q) mismatch (-want +got):\n%s", c.in, diff)
			}
		})
	}
}

func TestFirstMessageInitialize(t *testing.T) {
	m := ParseFirst([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"rootPath":"/w"}}` + "\n"))
	p := m.Initialize()
	if p == nil || p.RootPath == nil || *p.RootPath != "/w" {
		t.Fatalf("Initialize() = %+v, want rootPath /w", p)
	}
	for _, in := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"runCommand","params":{"rootPath":"/w"}}` + "\n",
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"rootPath":7}}` + "\n",
		`[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}]` + "\n",
	} {
		if p := ParseFirst([]byte(in)).Initialize(); p != nil {
			t.Errorf("Initialize() of %q = %+v, want nil", in, p)
		}
	}
	if method, _, ok := ParseFirst([]byte(`{"method":"server/discover"}`)).Request(); !ok || method != "server/discover" {
		t.Errorf("Request() = %q, %v; want server/discover", method, ok)
	}
}

// TestPeekFirstWaitsForTheWholeMessage writes a header frame in two parts
// over a pipe that stays open, as a client that waits for its answer
// does: PeekFirst returns once the second part is in, and consumes
// nothing.
func TestPeekFirstWaitsForTheWholeMessage(t *testing.T) {
	const body = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`
	frame := fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
	r, w := io.Pipe()
	defer w.Close()
	br := bufio.NewReaderSize(r, 1<<10)
	done := make(chan FirstMessage)
	go func() { done <- PeekFirst(br) }() // owned by the test, which receives from done
	if _, err := io.WriteString(w, frame[:30]); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(w, frame[30:]); err != nil { // the pipe hands it over only once PeekFirst reads again
		t.Fatal(err)
	}
	m := <-done
	if string(m.Body) != body || string(m.Buffered) != frame {
		t.Errorf("PeekFirst = body %q, buffered %q; want %q, %q", m.Body, m.Buffered, body, frame)
	}
	if rest, _ := br.Peek(br.Buffered()); string(rest) != frame {
		t.Errorf("PeekFirst consumed input: %q left", rest)
	}
}

func TestPeekFirstEnds(t *testing.T) {
	for _, c := range []struct {
		name, in string
		size     int
	}{
		{"the input ends with half a message", `{"method":"initia`, 64},
		{"the buffer fills", `{"method":"initialize","params":{"rootUri":"file:///a/long/root"}}` + "\n", 16},
		{"a broken header", "Content-Type: x\r\n\r\n", 64},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, w := io.Pipe()
			go func() { // owned by the case: it ends once the write is read
				io.WriteString(w, c.in)
				if c.name == "the input ends with half a message" {
					w.Close()
				}
			}()
			defer w.Close()
			br := bufio.NewReaderSize(r, c.size)
			m := PeekFirst(br)
			if m.Body != nil {
				t.Errorf("Body = %q, want none", m.Body)
			}
			if !strings.HasPrefix(c.in, string(m.Buffered)) || len(m.Buffered) == 0 {
				t.Errorf("Buffered = %q, want a prefix of %q", m.Buffered, c.in)
			}
		})
	}
}

func TestPeekFraming(t *testing.T) {
	for in, want := range map[string]string{
		"\r\n  Content-Length: 2\r\n": FramingHeader,
		"\n{}":                        FramingNDJSON,
		"[":                           FramingNDJSON,
		"  ":                          "",
	} {
		// A reader that hands over one byte a read, as a pipe may.
		br := bufio.NewReader(iotest.OneByteReader(strings.NewReader(in)))
		if got := PeekFraming(br); got != want {
			t.Errorf("PeekFraming(%q) = %q, want %q", in, got, want)
		}
		if rest, _ := br.Peek(br.Buffered()); !strings.HasPrefix(in, string(rest)) || len(rest) == 0 && in != "" {
			t.Errorf("PeekFraming(%q) consumed input: %q left", in, rest)
		}
	}
}
