package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCutString takes a string member out of objects of every shape and
// checks the string and the rest against encoding/json.
func TestCutString(t *testing.T) {
	for _, obj := range []string{
		`{"path":"/a","content":"x\"y\\\\","size":3}`,
		`{"content":"first","path":"/a"}`,
		` { "size" : 3 , "nested" : {"content":"no","a":[1,"]}"]} , "content" : "last\\u0041" } `,
		`{"content":""}`,
	} {
		str, rest, err := cutString([]byte(obj), "content")
		if err != nil {
			t.Errorf("cutString(%s): %v", obj, err)
			continue
		}
		var whole map[string]any
		if err := json.Unmarshal([]byte(obj), &whole); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := json.Unmarshal(str, &got); err != nil {
			t.Errorf("cutString(%s) string %s: %v", obj, str, err)
		}
		if diff := cmp.Diff(whole["content"], got); diff != "" {
			t.Errorf("cutString(%s) string mismatch (-want +got):\n%s", obj, diff)
		}
		delete(whole, "content")
		var others map[string]any
		if err := json.Unmarshal(rest, &others); err != nil {
			t.Errorf("cutString(%s) rest %s: %v", obj, rest, err)
		}
		if diff := cmp.Diff(whole, others); diff != "" {
			t.Errorf("cutString(%s) rest mismatch (-want +got):\n%s", obj, diff)
		}
	}
	for _, bad := range []string{`[]`, `{"path":"a"}`, `{"content":3}`, `{"content":"open`} {
		if _, _, err := cutString([]byte(bad), "content"); err == nil {
			t.Errorf("cutString(%s) succeeded", bad)
		}
	}
}

// TestSplicer replaces a held placeholder by its string once, whatever
// else the answer holds.
func TestSplicer(t *testing.T) {
	sp := newSplicer()
	ph, drop := sp.hold(json.RawMessage(`"the \"content\""`))
	defer drop()
	answer, err := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": ph}}})
	if err != nil {
		t.Fatal(err)
	}
	got := string(sp.apply(answer))
	if want := `{"content":[{"text":"the \"content\"","type":"text"}]}`; got != want {
		t.Errorf("apply = %s, want %s", got, want)
	}
	if again := string(sp.apply(answer)); !strings.Contains(again, "toolhost-splice") {
		t.Errorf("a placeholder was replaced twice")
	}
}
