package mcp

import (
	"bufio"
	"encoding/json"

	"github.com/toolhost/toolhost/rpc"
)

// SniffSize is the smallest buffer [IsMCP] needs: a first line longer
// than the reader's buffer is taken for toolhost's protocol.
const SniffSize = 1 << 20

// IsMCP peeks at the first message on br, without consuming anything, and
// reports whether it opens an MCP session (see [Opens]). It blocks until
// the first line has arrived or the input has ended; Content-Length
// framing is decided from its first byte, without waiting for more.
func IsMCP(br *bufio.Reader) bool {
	if rpc.PeekFraming(br) != rpc.FramingNDJSON {
		return false
	}
	return Opens(rpc.PeekFirst(br))
}

// Opens reports whether a client's first message is an MCP client's: an
// "initialize" whose params carry "protocolVersion" (toolhost's own
// initialize has none), or "server/discover", the first request of MCP
// 2026-07-28. Content-Length framing, a batch, or a first line that is
// not whole are toolhost's protocol.
func Opens(m rpc.FirstMessage) bool {
	if m.Framing != rpc.FramingNDJSON {
		return false
	}
	method, params, ok := m.Request()
	if !ok {
		return false
	}
	switch method {
	case "server/discover":
		return true
	case "initialize":
		var p map[string]json.RawMessage
		if json.Unmarshal(params, &p) != nil {
			return false
		}
		_, ok := p["protocolVersion"]
		return ok
	}
	return false
}
