package stdio

import (
	"bytes"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// liftKey is the _meta member under which the transport hands the
// middleware what the SDK's request types have no field for, and would
// drop while decoding: the task member of a 2025-11-25 tools/call, and the
// JSON-RPC id and task ids of a subscriptions/listen (the SDK knows
// neither tasks nor the ids a subscription's notifications must carry).
// The transport sets it, and removes any a client sent, so that only the
// transport speaks under it.
const liftKey = "io.toolhost/wire"

// Lifted is the value under liftKey.
type Lifted struct {
	// ID is the request's JSON-RPC id, as JSON (subscriptions/listen).
	ID string `json:"id,omitempty"`
	// Task is tools/call's task member, as sent (2025-11-25).
	Task json.RawMessage `json:"task,omitempty"`
	// TaskIDs is subscriptions/listen's notifications.taskIds, as sent
	// (2026-07-28).
	TaskIDs json.RawMessage `json:"taskIds,omitempty"`
}

// Lift moves into params._meta[liftKey] what the SDK would drop of req. It
// leaves params it cannot parse alone: the SDK answers those. Every
// transport of package mcp applies it to each request it reads.
func Lift(req *jsonrpc.Request) {
	switch req.Method {
	case "tools/call":
		// The common call has neither: it is not parsed twice.
		if !bytes.Contains(req.Params, []byte(`"task"`)) && !bytes.Contains(req.Params, []byte(liftKey)) {
			return
		}
	case "subscriptions/listen":
	default:
		return
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(req.Params, &params) != nil || params == nil {
		return
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := params["_meta"]; ok && !IsNull(raw) {
		if json.Unmarshal(raw, &meta) != nil || meta == nil {
			return
		}
	}
	delete(meta, liftKey)
	var l Lifted
	switch req.Method {
	case "tools/call":
		if raw, ok := params["task"]; ok && !IsNull(raw) {
			l.Task = raw
		}
		delete(params, "task")
	case "subscriptions/listen":
		if req.ID.IsValid() {
			id, err := json.Marshal(req.ID.Raw())
			if err != nil {
				return
			}
			l.ID = string(id)
		}
		var filter map[string]json.RawMessage
		if raw, ok := params["notifications"]; ok && json.Unmarshal(raw, &filter) == nil {
			if ids, ok := filter["taskIds"]; ok && !IsNull(ids) {
				l.TaskIDs = ids
			}
		}
	}
	if l.ID != "" || l.Task != nil || l.TaskIDs != nil {
		b, err := json.Marshal(l)
		if err != nil {
			return
		}
		meta[liftKey] = b
	}
	if len(meta) > 0 {
		b, err := json.Marshal(meta)
		if err != nil {
			return
		}
		params["_meta"] = b
	} else {
		delete(params, "_meta")
	}
	if b, err := json.Marshal(params); err == nil {
		req.Params = b
	}
}

// LiftedOf returns what the transport lifted into a request's _meta.
func LiftedOf(meta sdk.Meta) (l Lifted, ok bool) {
	v, ok := meta[liftKey]
	if !ok {
		return l, false
	}
	b, err := json.Marshal(v)
	if err != nil || json.Unmarshal(b, &l) != nil {
		return l, false
	}
	return l, true
}

// IsNull reports whether raw is JSON null.
func IsNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }
