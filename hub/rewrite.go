package hub

import (
	"bytes"
	"encoding/json"
	"strings"
)

// idKeys are the members that carry a handle or command id, or a path of
// the destination's at any depth (a snapshot's progress file).
var idKeys = map[string]bool{"handleId": true, "commandId": true, "progressPath": true, "snapshotId": true}

// prefixIDs returns raw with every handle and command id, and every
// artifact path (a member ending in "Path" inside "artifacts"), prefixed
// with prefix ("NAME/"), at any depth: a ToolResult, a notification's
// params, an error's data with its partial result. Numbers keep their
// digits. It returns raw unchanged if it is not JSON.
func prefixIDs(raw json.RawMessage, prefix string) json.RawMessage {
	if len(raw) == 0 || !bytes.ContainsAny(raw, "{") {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return raw
	}
	walk(v, prefix, false)
	out, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return out
}

// walk prefixes the ids in v; inArtifacts says v is an "artifacts" object.
func walk(v any, prefix string, inArtifacts bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && s != "" {
				if idKeys[k] || (inArtifacts && strings.HasSuffix(k, "Path")) {
					x[k] = prefix + s
				}
				continue
			}
			walk(e, prefix, k == "artifacts")
		}
	case []any:
		for _, e := range x {
			walk(e, prefix, false)
		}
	}
}

// farHandleID returns the "handleId" member of params, if any.
func farHandleID(params json.RawMessage) string {
	var p struct {
		HandleID string `json:"handleId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	return p.HandleID
}

// prefixPath returns the result raw of readFile or writeFile with its
// "path" (the far absolute path) prefixed as artifact paths are:
// "NAME//srv/ws/x", which readFile routes back to the destination.
func prefixPath(raw json.RawMessage, prefix string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	var p string
	if json.Unmarshal(m["path"], &p) != nil || p == "" {
		return raw
	}
	b, err := json.Marshal(prefix + p)
	if err != nil {
		return raw
	}
	m["path"] = b
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}
