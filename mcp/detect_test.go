package mcp

import (
	"bufio"
	"io"
	"strings"
	"testing"
)

// TestIsMCP tells MCP first messages from toolhost's, over a pipe that
// stays open (the client waits for an answer), and leaves the bytes
// unread.
func TestIsMCP(t *testing.T) {
	for _, c := range []struct {
		first string
		want  bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}` + "\n", true},
		{"\n  " + `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}` + "\n", true},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"rootUri":"file:///tmp","capabilities":{}}}` + "\n", false},
		{`{"jsonrpc":"2.0","id":1,"method":"runCommand","params":{"protocolVersion":"x"}}` + "\n", false},
		{"Content-Length: 52\r\n\r\n" + `{"jsonrpc":"2.0","id":1,"method":"initialize"}`, false},
		{`[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"x"}}]` + "\n", false},
		{`{"jsonrpc":"2.0", not json` + "\n", false},
	} {
		r, w := io.Pipe()
		go func() { // owned by the test case: it ends when the write is read
			w.Write([]byte(c.first))
		}()
		br := bufio.NewReaderSize(r, SniffSize)
		if got := IsMCP(br); got != c.want {
			t.Errorf("IsMCP(%q) = %v, want %v", c.first, got, c.want)
		}
		rest, _ := br.Peek(br.Buffered())
		if !strings.HasPrefix(c.first, string(rest)) || len(rest) == 0 {
			t.Errorf("IsMCP(%q) consumed input: %q left", c.first, rest)
		}
		w.Close()
	}
}
