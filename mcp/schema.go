package mcp

import (
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// The schemas of tools/list go into many clients' model context, and
// through clients that read JSON Schema each their own way. They are
// therefore written small and in the form every client reads:
//
//   - no type arrays: a property that may be null is optional instead
//     (toolhost reads an absent member and a null one alike), and a null
//     that means something of its own (an env value that unsets a
//     variable) is an anyOf branch;
//   - no $ref: several clients resolve none, or only some;
//   - descriptions say once what the tool's description does not, and a
//     field like another tool's says so ("as in run_command");
//   - an output schema says what a client validates: that the structured
//     content is an object. What it holds is toolhost's result, as
//     PROTOCOL.md gives it (a ToolError's for an isError result), and
//     the text content says all of it the model needs. The output
//     schemas inferred from the Go types, nested, nullable and each with
//     the error's branch, made 79 KB of the 98 KB that tools/list was.
//
// The input schema a call's arguments are validated with is the one
// inferred from the Go types, nulls included: what a client sends is read
// as leniently as before.

// portableInput rewrites an input schema inferred from Go types into its
// portable form (see above), in place.
func portableInput(s *jsonschema.Schema) {
	portableNode(s, false)
}

// portableNode rewrites s and its subschemas; property says s is an
// object's property, whose null is its absence.
func portableNode(s *jsonschema.Schema, property bool) {
	if s == nil {
		return
	}
	nullable := slices.Contains(s.Types, "null")
	types := slices.DeleteFunc(slices.Clone(s.Types), func(t string) bool { return t == "null" })
	if property {
		// The null branch of a property goes: its absence says the same.
		s.AnyOf = slices.DeleteFunc(s.AnyOf, func(b *jsonschema.Schema) bool { return b.Type == "null" })
		nullable = false
	}
	switch {
	case s.Types == nil:
	case len(s.AnyOf) > 0:
		// The branches say the types.
		s.Types = nil
	case len(types) == 1 && !nullable:
		s.Type, s.Types = types[0], nil
	default:
		// A value that may be null, or of several types: a branch each.
		branch := *s
		branch.Description, branch.Types = "", nil
		if len(types) == 1 {
			branch.Type = types[0]
		}
		*s = jsonschema.Schema{Description: s.Description, AnyOf: []*jsonschema.Schema{&branch}}
		if len(types) != 1 {
			s.AnyOf = s.AnyOf[:0]
			for _, t := range types {
				s.AnyOf = append(s.AnyOf, &jsonschema.Schema{Type: t})
			}
		}
		if nullable {
			s.AnyOf = append(s.AnyOf, &jsonschema.Schema{Type: "null"})
		}
	}
	for _, p := range s.Properties {
		portableNode(p, true)
	}
	portableNode(s.Items, false)
	if s.AdditionalProperties != nil && s.AdditionalProperties.Not == nil {
		portableNode(s.AdditionalProperties, false)
	}
	for _, b := range s.AnyOf {
		portableNode(b, false)
	}
}

// withoutDescriptions removes the descriptions under s (not its own): a
// schema whose parent says "as the command's" needs none of its own.
func withoutDescriptions(s *jsonschema.Schema) {
	for _, p := range s.Properties {
		p.Description = ""
		withoutDescriptions(p)
	}
	if s.Items != nil {
		s.Items.Description = ""
		withoutDescriptions(s.Items)
	}
	for _, b := range s.AnyOf {
		b.Description = ""
		withoutDescriptions(b)
	}
}
