package rpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// DecodeParams decodes a request's params into v strictly: a param of the
// wrong type, a field v does not have, or trailing data is an InvalidParams
// error whose data names the field. Absent or null params decode as {}.
func DecodeParams(raw json.RawMessage, v any) error {
	return decodeParams(raw, v, true)
}

// decodeParams is DecodeParams with the unknown-field check optional, for the
// LSP messages whose clients add fields of their own.
func decodeParams(raw json.RawMessage, v any, strict bool) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	if raw[0] != '{' {
		return InvalidParams("", "params must be an object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return paramsError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return InvalidParams("", "trailing data after params")
	}
	return nil
}

// paramsError turns a decoding error into InvalidParams naming the field.
func paramsError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := typeErr.Field
		if field == "" {
			field = "params"
		}
		return InvalidParams(field, "must be %s, not %s", jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
	}
	var syntaxErr *json.SyntaxError
	if errors.As(err, &syntaxErr) {
		return InvalidParams("", "malformed params at offset %d: %v", syntaxErr.Offset, syntaxErr)
	}
	// DisallowUnknownFields reports `json: unknown field "x"`.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		field := strings.Trim(name, `"`)
		return InvalidParams(field, "unknown field")
	}
	// A field's own UnmarshalJSON failed (a progress token, say).
	return InvalidParams("", "%v", err)
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
