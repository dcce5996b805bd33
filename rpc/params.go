package rpc

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/toolhost/toolhost/protocol"
)

// decodeParams decodes a message's params into v: member names match
// exactly (case-sensitively), a value of the wrong type, or with strict a
// member v does not have, is an InvalidParams error whose data names the
// field ("steps[0].argv"). Absent or null params decode as {}. strict is
// off for the LSP messages whose clients add members of their own.
func decodeParams(raw []byte, v any, strict bool) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	if raw[0] != '{' {
		return protocol.InvalidParams("", "params must be an object")
	}
	if bytes.Equal(raw, []byte("{}")) {
		return nil // the cheapest requests: nothing to decode
	}
	if err := jsonv2.Unmarshal(raw, v, jsonv2.RejectUnknownMembers(strict)); err != nil {
		return paramsError(err)
	}
	return nil
}

// paramsError turns a decoding error into InvalidParams naming the field.
func paramsError(err error) error {
	var se *jsonv2.SemanticError
	if errors.As(err, &se) {
		field := fieldName(string(se.JSONPointer))
		switch {
		case se.Err != nil && strings.Contains(se.Err.Error(), "unknown object member"):
			return protocol.InvalidParams(field, "unknown field")
		case se.Err != nil:
			return protocol.InvalidParams(field, "%v", se.Err)
		case se.GoType != nil:
			return protocol.InvalidParams(field, "must be %s, not %s", jsonKind(se.GoType.Kind().String()), kindName(se.JSONKind.String()))
		}
		return protocol.InvalidParams(field, "%v", err)
	}
	return protocol.InvalidParams("", "malformed params: %v", err)
}

// fieldName turns a JSON pointer into a field path: /steps/0/argv becomes
// steps[0].argv.
func fieldName(ptr string) string {
	var b strings.Builder
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		if _, err := strconv.Atoi(tok); err == nil {
			fmt.Fprintf(&b, "[%s]", tok)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// kindName names a JSON kind as jsontext prints it ("{", "[", "string").
func kindName(k string) string {
	switch k {
	case "{":
		return "an object"
	case "[":
		return "an array"
	case "\"", "string":
		return "a string"
	case "0", "number":
		return "a number"
	case "t", "f", "true", "false", "boolean":
		return "a boolean"
	case "n", "null":
		return "null"
	}
	return k
}

// jsonKind names a Go kind the way a JSON user would.
func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	}
	return goKind
}
