package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
)

// SniffSize is the smallest buffer [IsMCP] needs: a first line longer
// than the reader's buffer is taken for toolhost's protocol.
const SniffSize = 1 << 20

// IsMCP peeks at the first message on br, without consuming anything, and
// reports whether it is an MCP client's: an "initialize" whose params
// carry "protocolVersion" (toolhost's own initialize has none), or
// "server/discover", the first request of MCP 2026-07-28. It blocks until
// the first line has arrived or the input has ended. Content-Length
// framing, a batch, or a first line that does not fit in br's buffer are
// toolhost's protocol.
func IsMCP(br *bufio.Reader) bool {
	size := 1
	for {
		b, err := br.Peek(size)
		if err == nil {
			// Look at everything buffered, not only the bytes waited for.
			b, _ = br.Peek(br.Buffered())
		}
		rest := bytes.TrimLeft(b, " \t\r\n")
		if len(rest) > 0 && rest[0] != '{' {
			return false
		}
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			return isMCPMessage(rest[:i])
		}
		if err != nil {
			return isMCPMessage(b)
		}
		if size >= br.Size() {
			return false
		}
		size = min(br.Buffered()+1, br.Size())
	}
}

// isMCPMessage reports whether one JSON message opens an MCP session.
func isMCPMessage(line []byte) bool {
	var m struct {
		Method string                     `json:"method"`
		Params map[string]json.RawMessage `json:"params"`
	}
	if json.Unmarshal(bytes.TrimSpace(line), &m) != nil {
		return false
	}
	switch m.Method {
	case "server/discover":
		return true
	case "initialize":
		_, ok := m.Params["protocolVersion"]
		return ok
	}
	return false
}
