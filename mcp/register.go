package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/protocol"
)

// ToolError is the structured content of a tool error: toolhost's error
// code, message and data (the field or path concerned, the reason).
type ToolError struct {
	// Error is why the call failed.
	Error ErrorInfo `json:"error"`
}

// ErrorInfo is one toolhost error.
type ErrorInfo struct {
	// Code is toolhost's error code (PROTOCOL.md): -32602 invalid
	// arguments, -32001 a path outside the workspace, -32004 a handle not
	// found, ….
	Code int `json:"code"`
	// Message says what went wrong.
	Message string `json:"message"`
	// Data gives details: the field or path concerned, the reason and
	// what to do.
	Data *protocol.ErrorData `json:"data,omitempty"`
}

// schemaOptions give the protocol's types with a JSON form of their own
// (MarshalJSON) the schema of that form.
var schemaOptions = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	// The sandbox argument's description says what network's values mean.
	reflect.TypeFor[protocol.Network](): {
		// Types as well as AnyOf: the inference puts "null" in Types for a
		// pointer, and null alone would be left of a schema without them.
		// The schema tools/list gives has neither null nor Types
		// (portableInput).
		Types: []string{"boolean", "object"},
		AnyOf: []*jsonschema.Schema{
			{Type: "null"},
			{Type: "boolean"},
			{Type: "object", Required: []string{"allow"}, AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
				Properties: map[string]*jsonschema.Schema{"allow": {Type: "array", Items: &jsonschema.Schema{Type: "string"}}}},
		},
	},
}}

// addTool registers a tool whose arguments are In and whose structured
// result is Out (or, when isError, a ToolError). The input schema comes
// from In; the output schema says only that the structured content is an
// object (schema.go says why).
// Arguments that do not match the schema are an isError result naming the
// field, so that a model can correct itself. The first call opens the
// workspace.
func addTool[In, Out any](s *Server, name, title, description string, annotations *sdk.ToolAnnotations,
	h func(context.Context, *sdk.CallToolRequest, *In) (*sdk.CallToolResult, error)) {
	inSchema, err := jsonschema.For[In](schemaOptions)
	if err != nil {
		panic(fmt.Sprintf("mcp: input schema of %s: %v", name, err))
	}
	s.destinationField(inSchema)
	if s.cfg.SnapshotDir == nil {
		// A server without a snapshot store offers no snapshot: true.
		delete(inSchema.Properties, "snapshot")
	}
	// Arguments are validated with the schema as inferred, which reads a
	// null as an absent member; tools/list gives its portable form.
	resolved, err := inSchema.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("mcp: input schema of %s: %v", name, err))
	}
	listed := inSchema.CloneSchemas()
	portableInput(listed)
	if steps := listed.Properties["steps"]; steps != nil && steps.Items != nil {
		// A step's sandbox says it is the command's, whose fields
		// describe themselves once.
		if sb := steps.Items.Properties["sandbox"]; sb != nil {
			withoutDescriptions(sb)
		}
	}
	required := requiredFields(reflect.TypeFor[In]())
	if annotations == nil {
		annotations = &sdk.ToolAnnotations{}
	}
	annotations.Title = title
	if annotations.OpenWorldHint == nil {
		annotations.OpenWorldHint = ptr(false)
	}
	tool := &sdk.Tool{
		Name:         name,
		Title:        title,
		Description:  description,
		InputSchema:  listed,
		OutputSchema: &jsonschema.Schema{Type: "object"},
		Annotations:  annotations,
	}
	s.mcp.AddTool(tool, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		raw := bytes.TrimSpace(req.Params.Arguments)
		if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
			raw = []byte("{}")
		}
		// The fast path decodes strictly (member names match exactly, none
		// unknown, types right); arguments it refuses, or that leave a
		// required field at its zero value (absent, or given so), go
		// through the schema, whose error names the field.
		in := new(In)
		if derr := jsonv2.Unmarshal(raw, in, jsonv2.RejectUnknownMembers(true)); derr != nil || zeroField(in, required) {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				return argumentError("", "the arguments are not JSON: "+err.Error()), nil
			}
			if err := resolved.Validate(v); err != nil {
				return argumentError(schemaField(err.Error()), err.Error()), nil
			}
			if derr != nil {
				return argumentError("", derr.Error()), nil
			}
		}
		if _, inputs, err := s.ws.open(ctx, req.Session, req.Params.InputResponses); inputs != nil {
			return &sdk.CallToolResult{InputRequests: inputs}, nil
		} else if err != nil {
			return s.toolError(err)
		}
		return h(ctx, req, in)
	})
}

// destinationField fits a tool's destination argument to the server's
// command line: without --destination there is none; with it, its enum
// names the destinations, so that a model knows which there are.
func (s *Server) destinationField(in *jsonschema.Schema) {
	prop := in.Properties["destination"]
	if prop == nil {
		return
	}
	if len(s.cfg.Destinations) == 0 {
		delete(in.Properties, "destination")
		return
	}
	for _, d := range s.cfg.Destinations {
		prop.Enum = append(prop.Enum, d.Name)
	}
}

// requiredFields returns the indexes of the fields of struct type t that
// its schema requires: those whose JSON name has neither omitempty nor
// omitzero.
func requiredFields(t reflect.Type) []int {
	var idx []int
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "-" {
			continue
		}
		_, opts, _ := strings.Cut(tag, ",")
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			idx = append(idx, i)
		}
	}
	return idx
}

// zeroField reports whether one of the fields idx of *in is its type's
// zero value.
func zeroField(in any, idx []int) bool {
	v := reflect.ValueOf(in).Elem()
	for _, i := range idx {
		if v.Field(i).IsZero() {
			return true
		}
	}
	return false
}

// argumentError is the isError result of arguments that do not fit the
// input schema.
func argumentError(field, reason string) *sdk.CallToolResult {
	msg := "invalid arguments"
	if field != "" {
		msg += ": " + field
	}
	return errorResult(ErrorInfo{Code: protocol.CodeInvalidParams, Message: msg, Data: &protocol.ErrorData{Field: field, Reason: reason}})
}

// schemaAt finds the schema paths a validation error goes through. It,
// schemaPath and schemaMissing are compiled at their first use, not when
// the process starts, which every session pays for.
var schemaAt = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`validating (/[^:\s]*)`) })

// schemaPath finds the properties and items a schema error names.
var schemaPath = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`/(properties|items)/([^/:\s"]+)`) })

// schemaMissing finds the properties a schema error says are missing.
var schemaMissing = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`missing properties: \[?"?([A-Za-z0-9_]+)`) })

// schemaField turns a schema validation error into the field it concerns,
// as toolhost names fields ("steps[0].argv").
func schemaField(msg string) string {
	// The validator names each schema on the way down: relative to the
	// one before, or, for a nested object's properties, with that one's
	// path again, which is cut.
	var path strings.Builder
	prev := ""
	for _, m := range schemaAt().FindAllStringSubmatch(msg, -1) {
		p := m[1]
		if prev != "" && strings.HasPrefix(p, prev+"/") {
			p = strings.TrimPrefix(p, prev)
		}
		path.WriteString(p)
		prev = m[1]
	}
	if path.Len() == 0 {
		path.WriteString(msg)
	}
	var b strings.Builder
	for _, m := range schemaPath().FindAllStringSubmatch(path.String(), -1) {
		if m[1] == "items" {
			b.WriteString("[" + m[2] + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(m[2])
	}
	if m := schemaMissing().FindStringSubmatch(msg); m != nil {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(m[1])
	}
	return b.String()
}

// toolError turns a toolhost error into the tool's isError result, with
// its code and data in the structured content. A call whose transport has
// ended is a protocol error.
func (s *Server) toolError(err error) (*sdk.CallToolResult, error) {
	var e *protocol.Error
	if !asRPCError(err, &e) {
		return nil, fmt.Errorf("%w: %v", errClosed, err)
	}
	return errorResult(ErrorInfo{Code: e.Code, Message: e.Message, Data: e.Data}), nil
}

// errorResult is an isError result: the message and its reason as text,
// and the error as structured content.
func errorResult(info ErrorInfo) *sdk.CallToolResult {
	text := fmt.Sprintf("error %d: %s", info.Code, info.Message)
	if info.Data != nil && info.Data.Reason != "" && !strings.Contains(info.Message, info.Data.Reason) {
		text += "\n" + info.Data.Reason
	}
	return &sdk.CallToolResult{
		IsError:           true,
		Content:           []sdk.Content{&sdk.TextContent{Text: text}},
		StructuredContent: ToolError{Error: info},
	}
}
