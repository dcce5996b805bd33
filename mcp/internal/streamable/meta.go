package streamable

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// metaKey is the _meta member of a request's params in which the
// transport puts the request's JSON-RPC id. Only the transport may set
// it: one a client sent is removed.
const metaKey = "io.toolhost/http"

// requestKey is the context key of WithRequest.
type requestKey struct{}

// WithRequest returns ctx marked as the handling of the incoming request
// id: a message written with it (Write or Notify) goes on the stream of
// the POST that carried that request while that stream is open, else on
// the session's standalone GET stream.
func WithRequest(ctx context.Context, id jsonrpc.ID) context.Context {
	return context.WithValue(ctx, requestKey{}, id)
}

// requestOf returns the id WithRequest put in ctx (an invalid id if none).
func requestOf(ctx context.Context) jsonrpc.ID {
	id, _ := ctx.Value(requestKey{}).(jsonrpc.ID)
	return id
}

// RequestID reads, from a request's params' _meta, the id the transport
// put there.
func RequestID(meta map[string]any) (jsonrpc.ID, bool) {
	m, ok := meta[metaKey].(map[string]any)
	if !ok {
		return jsonrpc.ID{}, false
	}
	var v any
	switch id := m["id"].(type) {
	case string, float64:
		v = id
	case json.Number:
		f, err := strconv.ParseFloat(string(id), 64)
		if err != nil {
			return jsonrpc.ID{}, false
		}
		v = f
	case int64:
		v = float64(id)
	default:
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(v)
	return id, err == nil && id.IsValid()
}

// mayHaveMeta reports whether params, a JSON object, may have a _meta
// member: its name, or an escape that could spell it, appears.
func mayHaveMeta(params []byte) bool {
	return bytes.Contains(params, []byte(`"_meta"`)) || bytes.Contains(params, []byte(`\u`))
}

// markRequest puts req's id into its params' _meta under metaKey,
// replacing any a client sent. Params that are an object without a _meta
// member (the common case) get the member inserted after their opening
// brace, the rest left as it is; anything else is decoded and encoded
// again. Params that are not an object (which MCP never sends) are left
// alone.
func markRequest(req *jsonrpc.Request) {
	id, err := json.Marshal(req.ID.Raw())
	if err != nil {
		return
	}
	mark := append(append([]byte(`{"id":`), id...), '}')
	member := append([]byte(`"`+metaKey+`":`), mark...)

	p := bytes.TrimSpace(req.Params)
	if len(p) == 0 || string(p) == "null" {
		req.Params = append(append([]byte(`{"_meta":{`), member...), "}}"...)
		return
	}
	if p[0] != '{' {
		return
	}
	if !mayHaveMeta(p) {
		rest := bytes.TrimSpace(p[1:])
		b := make([]byte, 0, len(p)+len(member)+16)
		b = append(append(append(b, `{"_meta":{`...), member...), '}')
		if len(rest) == 0 || rest[0] != '}' {
			b = append(b, ',')
		}
		req.Params = append(b, rest...)
		return
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(p, &obj) != nil {
		return // not valid: the SDK rejects it
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(obj["_meta"], &meta) != nil || meta == nil {
		meta = make(map[string]json.RawMessage)
	}
	meta[metaKey] = mark
	b, err := json.Marshal(meta)
	if err != nil {
		return
	}
	obj["_meta"] = b
	if b, err = json.Marshal(obj); err == nil {
		req.Params = b
	}
}
