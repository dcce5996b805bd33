package stdio

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
		str, rest, err := CutString([]byte(obj), "content")
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
		if _, _, err := CutString([]byte(bad), "content"); err == nil {
			t.Errorf("cutString(%s) succeeded", bad)
		}
	}
}

// TestSplicer replaces a held placeholder by its string once, whatever
// else the answer holds.
func TestSplicer(t *testing.T) {
	sp := NewSplicer()
	ph, drop := sp.Hold(json.RawMessage(`"the \"content\""`))
	defer drop()
	answer, err := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": ph}}})
	if err != nil {
		t.Fatal(err)
	}
	got, written := sp.Apply(answer)
	if want := `{"content":[{"text":"the \"content\"","type":"text"}]}`; string(got) != want {
		t.Errorf("apply = %s, want %s", got, want)
	}
	if len(written) != 0 {
		t.Errorf("apply returned %d callbacks for a plain hold", len(written))
	}
	if again, _ := sp.Apply(answer); !strings.Contains(string(again), "toolhost-splice") {
		t.Errorf("a placeholder was replaced twice")
	}
}

// TestSplicerWritten hands back the callback of a held string once, with
// the answer that holds it, and never for another answer.
func TestSplicerWritten(t *testing.T) {
	sp := NewSplicer()
	calls := 0
	ph, drop := sp.HoldThen(json.RawMessage(`"h-7"`), func() { calls++ })
	defer drop()
	if _, written := sp.Apply([]byte(`{"other":"answer"}`)); len(written) != 0 {
		t.Fatalf("an answer without the placeholder returned %d callbacks", len(written))
	}
	answer, _ := json.Marshal(map[string]string{"taskId": ph})
	got, written := sp.Apply(answer)
	if string(got) != `{"taskId":"h-7"}` {
		t.Errorf("apply = %s", got)
	}
	for _, f := range written {
		f()
	}
	if _, again := sp.Apply(answer); calls != 1 || len(again) != 0 {
		t.Errorf("callback ran %d times, %d more returned, want once", calls, len(again))
	}
}
