package rpc

import (
	"bufio"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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

func TestReplyKeys(t *testing.T) {
	tests := []struct {
		body string
		want []string
	}{
		{`{"jsonrpc":"2.0","id":3,"result":{"big":"…"}}`, []string{"n:3"}},
		{`{"jsonrpc":"2.0","id":"x","error":{"code":-1,"message":"m"}}`, []string{"s:x"}},
		{`{"jsonrpc":"2.0","id":3,"method":"window/workDoneProgress/create","params":{}}`, nil},
		{`{"jsonrpc":"2.0","method":"toolResult","params":{}}`, nil},
		{`[{"jsonrpc":"2.0","id":1,"result":1},{"jsonrpc":"2.0","id":"2","result":2}]`, []string{"n:1", "s:2"}},
		{`{"jsonrpc":"2.0","id":-4,"result":null}`, []string{"n:-4"}},
		{`{"jsonrpc":"2.0","id":"a\"b","result":null}`, []string{`s:a"b`}},
		{`{"jsonrpc":"2.0","id":"abc","error":{}}`, []string{"s:abc"}},
		{`{"id":5,"jsonrpc":"2.0","result":1}`, []string{"n:5"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, replyKeys([]byte(tt.body))); diff != "" {
			t.Errorf("replyKeys(%s) mismatch (-want +got):\n%s", tt.body, diff)
		}
	}
}

func TestObjectMembers(t *testing.T) {
	tests := map[string]string{
		`[1,{"a":1},"x",null]`: `[{},{"a":1},{},{}]`,
		`[{"a":1}]`:            `[{"a":1}]`,
	}
	for in, want := range tests {
		if got := string(objectMembers([]byte(in))); got != want {
			t.Errorf("objectMembers(%s) = %s, want %s", in, got, want)
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
