package integration

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/toolhost/toolhost/protocol"
)

// Output helpers of the PTY tests that the orphan matrix shares, on every
// platform the package vets on.

// decodeOutput returns an output notification's bytes. It does not fail
// the test itself: it runs under the harness's lock, in waitFor's match.
func decodeOutput(o protocol.OutputParams) ([]byte, error) {
	switch o.Encoding {
	case "", protocol.EncodingUTF8:
		return []byte(o.Data), nil
	case protocol.EncodingBase64:
		b, err := base64.StdEncoding.DecodeString(o.Data)
		if err != nil {
			return nil, fmt.Errorf("output seq %d: bad base64: %w", o.Seq, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("output seq %d: unknown encoding %q", o.Seq, o.Encoding)
}

// awaitStreamOnly waits until the handle's streamed output on stream has
// contained text. It fails the test if the handle's toolResult comes
// first, or if output of the handle comes on another stream.
func (s *server) awaitStreamOnly(handle string, stream protocol.Stream, text string) {
	s.t.Helper()
	var seen []byte
	var bad error
	var ended json.RawMessage
	s.waitFor(0, fmt.Sprintf("%s output %q of %s", stream, text, handle), func(m msg) bool {
		if m.Method == protocol.NotifyToolResult && idsOf(m.Params).HandleID == handle {
			ended = m.Params
			return true
		}
		var o protocol.OutputParams
		if m.Method != protocol.NotifyOutput || json.Unmarshal(m.Params, &o) != nil || o.HandleID != handle {
			return false
		}
		if o.Stream != stream {
			bad = fmt.Errorf("output on stream %q, want only %q: %s", o.Stream, stream, m.Params)
			return true
		}
		b, err := decodeOutput(o)
		if err != nil {
			bad = err
			return true
		}
		seen = append(seen, b...)
		return bytes.Contains(seen, []byte(text))
	})
	if bad != nil {
		s.t.Fatalf("%s: %v", handle, bad)
	}
	if ended != nil {
		s.t.Fatalf("%s ended before its %s output held %q (it held %q): %s", handle, stream, text, seen, ended)
	}
}
