package rpc

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolhost/toolhost/protocol"
	"go.lsp.dev/jsonrpc2"
)

func TestIDFromPrefix(t *testing.T) {
	tests := []struct {
		prefix string
		want   jsonrpc2.ID
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"writeFile","params":{"content":"xxxx`, jsonrpc2.NewNumberID(7)},
		{`{"id":"abc","jsonrpc":"2.0"`, jsonrpc2.NewStringID("abc")},
		{`{"jsonrpc":"2.0","method":"x","params":{"content":"xxxx`, jsonrpc2.ID{}},
		{`{"jsonrpc":"2.0","id":1.5`, jsonrpc2.ID{}},
		{`[{"id":1}`, jsonrpc2.ID{}},
		{`garbage`, jsonrpc2.ID{}},
	}
	for _, tt := range tests {
		if got := idFromPrefix([]byte(tt.prefix)); got != tt.want {
			t.Errorf("idFromPrefix(%q) = %v, want %v", tt.prefix, got, tt.want)
		}
	}
}

// TestDecodeMessage checks what each message decodes to, and why an
// invalid one is refused, under which id.
func TestDecodeMessage(t *testing.T) {
	type got struct {
		Kind   string
		ID     string
		Method string
		Params string
		Result string
		Code   int
		Reason string
	}
	tests := []struct {
		frame string
		want  got
	}{
		{`{"jsonrpc":"2.0","id":3,"method":"runCommand","params":{"argv":["true"]}}`, got{Kind: "call", ID: "3", Method: "runCommand", Params: `{"argv":["true"]}`}},
		{`{"params":[1],"method":"x","jsonrpc":"2.0","id":"a"}`, got{Kind: "call", ID: `"a"`, Method: "x", Params: `[1]`}},
		{`{"jsonrpc":"2.0","method":"exit"}`, got{Kind: "notification", ID: "<nil>", Method: "exit"}},
		{`{"jsonrpc":"2.0","method":"exit","params":null}`, got{Kind: "notification", ID: "<nil>", Method: "exit"}},
		{`{"jsonrpc":"2.0","id":7,"result":null}`, got{Kind: "result", ID: "7", Result: "null"}},
		{`{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"}}`, got{Kind: "error", ID: "7", Code: -32601}},
		{`{"id":2,"method":"progress"}`, got{ID: "2", Code: protocol.CodeInvalidRequest, Reason: `"jsonrpc" must be "2.0"`}},
		{`{"jsonrpc":"2.0","id":{},"method":"progress"}`, got{ID: "<nil>", Code: protocol.CodeInvalidRequest, Reason: `"id" must be a string or an integer`}},
		{`{"jsonrpc":"2.0","id":null,"method":"progress"}`, got{ID: "<nil>", Code: protocol.CodeInvalidRequest, Reason: `"id" must be a string or an integer`}},
		{`{"jsonrpc":"2.0","id":1.5,"method":"progress"}`, got{ID: "<nil>", Code: protocol.CodeInvalidRequest, Reason: `"id" must be a string or an integer`}},
		{`{"jsonrpc":"2.0","id":4,"method":5}`, got{ID: "4", Code: protocol.CodeInvalidRequest, Reason: `"method" must be a string`}},
		{`{"jsonrpc":"2.0","id":4,"method":"x","params":5}`, got{ID: "4", Code: protocol.CodeInvalidRequest, Reason: `"params" must be an object or an array`}},
		{`{"jsonrpc":"2.0","id":4,"method":"x","result":5}`, got{ID: "4", Code: protocol.CodeInvalidRequest, Reason: `a request has no "result" or "error"`}},
		{`{"jsonrpc":"2.0","id":5}`, got{ID: "5", Code: 0}},
		{`{not json`, got{ID: "<nil>", Code: protocol.CodeParseError, Reason: "malformed JSON: invalid character 'n' looking for beginning of object key string"}},
		{`{"jsonrpc":"2.0","id":2,"method":"progress"} trailing`, got{ID: "<nil>", Code: protocol.CodeParseError, Reason: "malformed JSON: invalid character 't' after top-level value"}},
	}
	kinds := map[jsonrpc2.MessageViewKind]string{
		jsonrpc2.MessageViewCall: "call", jsonrpc2.MessageViewNotification: "notification",
		jsonrpc2.MessageViewResponseResult: "result", jsonrpc2.MessageViewResponseError: "error",
	}
	for _, tt := range tests {
		m, id, e := decodeMessage([]byte(tt.frame))
		g := got{Kind: kinds[m.kind], ID: "<nil>", Method: m.method, Params: string(m.params), Result: string(m.result)}
		if id.IsValid() {
			g.ID = string(appendID(nil, id))
		}
		if m.err != nil {
			g.Code = m.err.Code
		}
		if e != nil {
			g.Code = e.Code
			if e.Data != nil {
				g.Reason = e.Data.Reason
			}
		}
		if diff := cmp.Diff(tt.want, g); diff != "" {
			t.Errorf("decodeMessage(%s) mismatch (-want +got):\n%s", tt.frame, diff)
		}
	}
}

// TestEncodeResult checks a result is written after the envelope as the
// handler encoded it, under either kind of id.
func TestEncodeResult(t *testing.T) {
	for id, want := range map[jsonrpc2.ID]string{
		jsonrpc2.NewNumberID(-4):    `{"jsonrpc":"2.0","id":-4,"result":{"a":1}}`,
		jsonrpc2.NewStringID(`a"b`): `{"jsonrpc":"2.0","id":"a\"b","result":{"a":1}}`,
	} {
		got := encodeResult(id, []byte(`{"a":1}`))
		if string(got) != want || !json.Valid(got) {
			t.Errorf("encodeResult(%v) = %s, want %s", id, got, want)
		}
	}
}

func TestFieldName(t *testing.T) {
	tests := map[string]string{
		"/steps/0/argv": "steps[0].argv",
		"/env/A~1B":     "env.A/B",
		"/timeoutMS":    "timeoutMS",
		"":              "",
	}
	for in, want := range tests {
		if got := fieldName(in); got != want {
			t.Errorf("fieldName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDetectFraming(t *testing.T) {
	tests := map[string]string{
		"Content-Length: 2\r\n\r\n{}": FramingHeader,
		"content-length: 2\r\n\r\n{}": FramingHeader,
		"\n\n  {\"jsonrpc\":\"2.0\"}": FramingNDJSON,
		"[{}]":                        FramingNDJSON,
	}
	for in, want := range tests {
		got, err := detectFraming(bufio.NewReader(strings.NewReader(in)))
		if err != nil || got != want {
			t.Errorf("detectFraming(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := detectFraming(bufio.NewReader(strings.NewReader("  \n"))); err == nil {
		t.Error("detectFraming of white space only: no error")
	}
}
