package process

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestStartNamesTheBadField checks argv and env are refused, before
// anything runs, with an *InvalidError whose field is named as on the wire.
func TestStartNamesTheBadField(t *testing.T) {
	m := newTestManager(t, Config{})
	nul := "a\x00b"
	tests := []struct {
		name string
		spec Spec
		want InvalidError
	}{
		{"no argv", Spec{}, InvalidError{"argv", "required: the command and its arguments"}},
		{"empty command", Spec{Argv: []string{""}}, InvalidError{"argv[0]", "the command must not be empty"}},
		{"NUL in an argument", Spec{Argv: []string{"echo", nul}}, InvalidError{"argv[1]", "must not contain a NUL byte"}},
		{"bad variable name", Spec{Argv: []string{"true"}, Env: map[string]*string{"A=B": nil}}, InvalidError{"env", `bad variable name "A=B"`}},
		{"NUL in a value", Spec{Argv: []string{"true"}, Env: map[string]*string{"A": &nul}}, InvalidError{"env.A", "must not contain a NUL byte"}},
		{"step without argv", Spec{Steps: []Step{{Name: "a", Argv: []string{"true"}}, {Name: "b"}}}, InvalidError{"steps[1].argv", "required: the command and its arguments"}},
		{"step env", Spec{Steps: []Step{{Name: "a", Argv: []string{"true"}, Env: map[string]*string{"": nil}}}}, InvalidError{"steps[0].env", `bad variable name ""`}},
		{"argv and steps", Spec{Argv: []string{"true"}, Steps: []Step{{Name: "a", Argv: []string{"true"}}}}, InvalidError{"steps", "give argv or steps, not both"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := m.Start(tt.spec, Observer{})
			var ie *InvalidError
			if !errors.As(err, &ie) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Start: %v, want an *InvalidError matching ErrInvalid", err)
			}
			if diff := cmp.Diff(tt.want, *ie); diff != "" {
				t.Errorf("error mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
