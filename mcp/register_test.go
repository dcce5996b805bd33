package mcp

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSchemaField names the field a schema error is about, as toolhost
// names fields.
func TestSchemaField(t *testing.T) {
	for msg, want := range map[string]string{
		`validating root: validating /properties/path: type: 3 has type "integer", want "string"`:                                       "path",
		`validating root: validating /properties/steps: validating /items/1: validating /properties/argv: type: want "array"`:           "steps[1].argv",
		`validating root: required: missing properties: ["argv"]`:                                                                       "argv",
		`validating root: validating /properties/steps: validating /items/0: required: missing properties: ["name"]`:                    "steps[0].name",
		`validating root: validating /properties/sandbox: validating /properties/sandbox/properties/network: type: x has type "string"`: "sandbox.network",
		`something else`: "",
	} {
		if got := schemaField(msg); got != want {
			t.Errorf("schemaField(%q) = %q, want %q", msg, got, want)
		}
	}
}

// TestRequiredFields finds the fields the schema requires: those without
// omitempty.
func TestRequiredFields(t *testing.T) {
	if diff := cmp.Diff([]int{0, 1}, requiredFields(reflect.TypeFor[WriteFileInput]())); diff != "" {
		t.Errorf("WriteFileInput mismatch (-want +got):\n%s", diff)
	}
	if got := requiredFields(reflect.TypeFor[ListCommandsInput]()); len(got) != 0 {
		t.Errorf("ListCommandsInput requires %v", got)
	}
	in := &WriteFileInput{Path: "a"}
	if !zeroField(in, []int{0, 1}) {
		t.Errorf("zeroField missed the empty content")
	}
}
