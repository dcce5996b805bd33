package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/toolhost/toolhost/protocol"
	"go.lsp.dev/jsonrpc2"
)

// encodeResult encodes a response with result, JSON the handler's encoder
// made, written after the envelope without decoding it again.
func encodeResult(id jsonrpc2.ID, result []byte) []byte {
	b := make([]byte, 0, len(result)+48)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = appendID(b, id)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}')
}

// encodeError encodes an error response.
func encodeError(id jsonrpc2.ID, e *protocol.Error) []byte {
	return jsonrpc2.AppendResponse(nil, id, nil, wireError(e))
}

// encodeBatch encodes the answers to a batch as one array.
func encodeBatch(values [][]byte) []byte {
	n := 2
	for _, v := range values {
		n += len(v) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, v := range values {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, v...)
	}
	return append(b, ']')
}

// appendID appends an id as JSON: a number, a string or null.
func appendID(b []byte, id jsonrpc2.ID) []byte {
	if n, ok := id.Number(); ok {
		return strconv.AppendInt(b, n, 10)
	}
	if s, ok := id.StringValue(); ok {
		q, _ := json.Marshal(s)
		return append(b, q...)
	}
	return append(b, "null"...)
}

// member records that a member of a message is present (null included:
// "result": null is a result) and the first byte of its value, without
// copying the value: params may be megabytes.
type member struct {
	set   bool
	first byte
}

// UnmarshalJSON is called for every value, null included.
func (m *member) UnmarshalJSON(b []byte) error {
	m.set, m.first = true, b[0]
	return nil
}

// rawMember is a member whose value is kept (an id: small).
type rawMember struct {
	set bool
	raw json.RawMessage
}

func (m *rawMember) UnmarshalJSON(b []byte) error {
	m.set, m.raw = true, append(json.RawMessage(nil), b...)
	return nil
}

// envelope is the shape of a JSON-RPC message, for saying why one is
// invalid.
type envelope struct {
	JSONRPC *string   `json:"jsonrpc"`
	ID      rawMember `json:"id"`
	Method  member    `json:"method"`
	Params  member    `json:"params"`
	Result  member    `json:"result"`
	Error   member    `json:"error"`
}

// whyInvalid says why a message object the dispatcher refused is not a
// valid request, notification or response: the error to answer and the
// id to answer it under. A malformed response comes back with code 0: it
// is dropped, not answered.
func whyInvalid(frame []byte) (jsonrpc2.ID, *protocol.Error) {
	var env envelope
	if err := json.Unmarshal(frame, &env); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			return jsonrpc2.ID{}, protocol.NewError(protocol.CodeParseError, &protocol.ErrorData{Reason: "malformed JSON: " + err.Error()}, "parse error: malformed JSON")
		}
		// A member of the wrong JSON type ("jsonrpc": 2).
		id, _ := parseID(env.ID)
		return id, protocol.NewError(protocol.CodeInvalidRequest, &protocol.ErrorData{Reason: err.Error()}, "invalid request")
	}
	id, idOK := parseID(env.ID)
	if !idOK {
		id = jsonrpc2.ID{}
	}
	bad := func(reason string) (jsonrpc2.ID, *protocol.Error) {
		return id, protocol.NewError(protocol.CodeInvalidRequest, &protocol.ErrorData{Reason: reason}, "invalid request: %s", reason)
	}
	switch {
	case env.JSONRPC == nil || *env.JSONRPC != "2.0":
		return bad(`"jsonrpc" must be "2.0"`)
	case !env.Method.set:
		return id, &protocol.Error{Message: "malformed response"}
	case env.Method.first != '"':
		return bad(`"method" must be a string`)
	case env.ID.set && !idOK:
		return bad(`"id" must be a string or an integer`)
	case env.Params.set && env.Params.first != '{' && env.Params.first != '[' && env.Params.first != 'n':
		return bad(`"params" must be an object or an array`)
	case env.Result.set || env.Error.set:
		return bad(`a request has no "result" or "error"`)
	}
	return bad("malformed message")
}

// parseID parses a request id: a string or an integer. A missing or null
// id is not valid.
func parseID(m rawMember) (jsonrpc2.ID, bool) {
	if !m.set {
		return jsonrpc2.ID{}, false
	}
	return idFromJSON(m.raw)
}

// idFromJSON parses a JSON string or integer as an id.
func idFromJSON(raw json.RawMessage) (jsonrpc2.ID, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return jsonrpc2.ID{}, false
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return jsonrpc2.ID{}, false
		}
		return jsonrpc2.NewStringID(s), true
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return jsonrpc2.ID{}, false
	}
	return jsonrpc2.NewNumberID(n), true
}

// idFromPrefix finds the id of a message from its first bytes, reading the
// top-level members in order until "id" or the end of the prefix.
func idFromPrefix(prefix []byte) jsonrpc2.ID {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return jsonrpc2.ID{}
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return jsonrpc2.ID{}
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return jsonrpc2.ID{}
		}
		if k == "id" {
			id, _ := idFromJSON(v)
			return id
		}
	}
	return jsonrpc2.ID{}
}

// syntaxReason describes why frame is not JSON.
func syntaxReason(frame []byte) string {
	var v any
	if err := json.Unmarshal(frame, &v); err != nil {
		return err.Error()
	}
	return "invalid JSON"
}

// clip cuts s to at most n bytes for a message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// wireError returns e as the library sends it.
func wireError(e *protocol.Error) *jsonrpc2.Error {
	w := jsonrpc2.NewError(jsonrpc2.Code(e.Code), e.Message)
	if e.Data != nil {
		if b, err := json.Marshal(e.Data); err == nil {
			w.Data = b
		}
	}
	return w
}

// toError turns any error a handler returns into the coded error sent: an
// *Error keeps its code and data; anything else is -32603 with the method
// named, so that no error ever goes out with code 0.
func toError(method string, err error) *protocol.Error {
	var e *protocol.Error
	if errors.As(err, &e) {
		return e
	}
	return &protocol.Error{Code: protocol.CodeInternalError, Message: err.Error(), Data: &protocol.ErrorData{Method: method, Reason: err.Error()}}
}
