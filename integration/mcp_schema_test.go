package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Issue 34: tools/list went into clients' model context at 98 KB for
// twelve tools, and the MCP Inspector's --strict found 418 portability
// warnings in its schemas. These tests hold both figures to their
// targets, through the binary: at most toolsListLimit bytes, and no
// finding.

// toolsListLimit is the most bytes the compact JSON of tools/list's
// result may take.
const toolsListLimit = 16 << 10

// listedTool is a tool of tools/list, its schemas as sent.
type listedTool struct {
	Name         string          `json:"name"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
}

// toolsList asks a session for tools/list and returns its result, compact,
// and its tools.
func toolsList(t *testing.T, s *taskSession) ([]byte, []listedTool) {
	t.Helper()
	raw := s.call("tools/list", map[string]any{}, nil)
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("tools/list result %s: %v", raw, err)
	}
	var list struct {
		Tools []listedTool `json:"tools"`
	}
	if err := json.Unmarshal(b.Bytes(), &list); err != nil {
		t.Fatalf("tools/list result: %v", err)
	}
	return b.Bytes(), list.Tools
}

// TestMCPToolsListSize measures the compact JSON of tools/list's result
// in both task forms (2025-11-25's adds each task tool's execution), as a
// default toolhost mcp answers it: at most toolsListLimit bytes.
func TestMCPToolsListSize(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		version string
		start   func(*testing.T, ...string) (*taskSession, map[string]any)
	}{{versionTasks2025, startTasks2025}, {versionTasks2026, startTasks2026}} {
		t.Run(c.version, func(t *testing.T) {
			t.Parallel()
			s, _ := c.start(t)
			all, tools := toolsList(t, s)
			var raw struct {
				Tools []json.RawMessage `json:"tools"`
			}
			if err := json.Unmarshal(all, &raw); err != nil {
				t.Fatal(err)
			}
			var sizes []string
			for i, tool := range tools {
				sizes = append(sizes, fmt.Sprintf("%s %d (input schema %d, output schema %d)", tool.Name, len(raw.Tools[i]), len(tool.InputSchema), len(tool.OutputSchema)))
			}
			t.Logf("tools/list: %d bytes compact for %d tools, limit %d; %s", len(all), len(tools), toolsListLimit, strings.Join(sizes, ", "))
			if len(tools) != 12 {
				t.Errorf("tools/list lists %d tools, want the 12", len(tools))
			}
			if len(all) > toolsListLimit {
				t.Errorf("tools/list is %d bytes compact, more than %d", len(all), toolsListLimit)
			}
		})
	}
}

// TestMCPToolSchemasPortable walks every schema of tools/list for what
// the MCP Inspector's --strict reports (type arrays, bare true or false
// schemas, schemas that constrain nothing, remote $refs) and what it does
// not (a required property that may be null, a local $ref that resolves
// to nothing, an input schema that is not an object), and reports the
// count: it must be 0.
func TestMCPToolSchemasPortable(t *testing.T) {
	t.Parallel()
	s, _ := startTasks2025(t)
	_, tools := toolsList(t, s)
	var findings []schemaFinding
	for _, tool := range tools {
		findings = append(findings, lintTool(t, tool)...)
	}
	t.Logf("%d portability findings in the schemas of %d tools", len(findings), len(tools))
	for _, f := range findings {
		t.Errorf("%s", f)
	}
}

// TestSchemaLint runs the walker of TestMCPToolSchemasPortable on schemas
// with one problem of each kind, so that a walker that finds nothing
// cannot pass that test unnoticed.
func TestSchemaLint(t *testing.T) {
	tool := listedTool{Name: "bad",
		InputSchema: json.RawMessage(`{"type":"object","required":["argv","env"],"additionalProperties":false,"properties":{
			"argv":{"type":["null","array"],"items":{"type":"string"}},
			"env":{"type":"object","additionalProperties":{"anyOf":[{"type":"string"},{"type":"null"}]}},
			"any":{"description":"anything"},
			"yes":true,
			"remote":{"$ref":"https://example.com/s.json"},
			"local":{"$ref":"#/$defs/gone"},
			"fine":{"$ref":"#/$defs/here"},
			"maybe":{"anyOf":[{"type":"integer"},{"type":"null"}]}},
			"$defs":{"here":{"type":"integer"}}}`),
		OutputSchema: json.RawMessage(`{"type":"object","required":["n"],"properties":{"n":{"anyOf":[{"type":"integer"},{"type":"null"}]}}}`),
	}
	var got []string
	for _, f := range lintTool(t, tool) {
		got = append(got, f.schema+" "+f.path+" "+f.rule)
	}
	slices.Sort(got)
	want := []string{
		"inputSchema properties.any untyped-schema",
		"inputSchema properties.argv nullable-required",
		"inputSchema properties.argv type-union",
		"inputSchema properties.local dangling-ref",
		"inputSchema properties.remote remote-ref",
		"inputSchema properties.yes boolean-schema",
		"outputSchema properties.n nullable-required",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("findings mismatch (-want +got):\n%s", diff)
	}
	notObject := listedTool{Name: "list", InputSchema: json.RawMessage(`{"type":"array","items":{"type":"string"}}`)}
	if f := lintTool(t, notObject); len(f) != 1 || f[0].rule != "input-root" {
		t.Errorf("an input schema of type array: findings %v, want one input-root", f)
	}
}

// schemaFinding is one portability problem of a tool's schema.
type schemaFinding struct {
	tool, schema, path, rule, detail string
}

func (f schemaFinding) String() string {
	return fmt.Sprintf("tool %s, %s at %q: %s: %s", f.tool, f.schema, f.path, f.rule, f.detail)
}

// The JSON Schema keywords the walker goes down, as the Inspector's lint
// (core/json/schemaLint.ts) names them.
var (
	// lintBooleanValued may be a bare true or false.
	lintBooleanValued = []string{"additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems"}
	// lintSubschema hold one schema ("items" also an array of them).
	lintSubschema = []string{"items", "contains", "not", "propertyNames", "if", "then", "else", "additionalProperties",
		"unevaluatedProperties", "additionalItems", "unevaluatedItems", "contentSchema"}
	// lintSubschemaArray hold a list of schemas.
	lintSubschemaArray = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	// lintSubschemaMap hold schemas by name.
	lintSubschemaMap = []string{"properties", "patternProperties", "dependentSchemas", "dependencies", "$defs", "definitions"}
	// lintConstraining are the keywords that constrain a value: a schema
	// with none accepts anything.
	lintConstraining = []string{"type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
		"maxLength", "minLength", "pattern", "format", "contentMediaType", "contentEncoding", "contentSchema", "maxItems", "minItems",
		"uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties", "required", "dependentRequired", "allOf", "anyOf",
		"oneOf", "not", "items", "prefixItems", "contains", "additionalItems", "unevaluatedItems", "properties", "patternProperties",
		"additionalProperties", "unevaluatedProperties", "propertyNames", "dependentSchemas", "dependencies", "$ref", "$dynamicRef",
		"$recursiveRef"}
)

// lintTool returns the portability problems of a tool's schemas.
func lintTool(t *testing.T, tool listedTool) []schemaFinding {
	t.Helper()
	var out []schemaFinding
	for _, sc := range []struct {
		kind string
		raw  json.RawMessage
	}{{"inputSchema", tool.InputSchema}, {"outputSchema", tool.OutputSchema}} {
		if len(sc.raw) == 0 {
			continue
		}
		var root any
		if err := json.Unmarshal(sc.raw, &root); err != nil {
			t.Fatalf("tool %s: %s %s: %v", tool.Name, sc.kind, sc.raw, err)
		}
		l := &schemaLinter{tool: tool.Name, schema: sc.kind, root: root}
		if m, ok := root.(map[string]any); sc.kind == "inputSchema" && (!ok || m["type"] != "object") {
			l.add("", "input-root", "an input schema must be an object schema with type \"object\"")
		}
		l.walk(root, "", "")
		out = append(out, l.findings...)
	}
	return out
}

// schemaLinter walks one schema.
type schemaLinter struct {
	tool, schema string
	root         any
	findings     []schemaFinding
}

func (l *schemaLinter) add(path, rule, detail string) {
	l.findings = append(l.findings, schemaFinding{tool: l.tool, schema: l.schema, path: path, rule: rule, detail: detail})
}

// walk checks node, found under keyword at path, and its subschemas.
func (l *schemaLinter) walk(node any, path, keyword string) {
	if b, ok := node.(bool); ok {
		if !slices.Contains(lintBooleanValued, keyword) {
			l.add(path, "boolean-schema", fmt.Sprintf("a bare %v where a schema object is expected", b))
		}
		return
	}
	n, ok := node.(map[string]any)
	if !ok {
		return
	}
	if types, ok := n["type"].([]any); ok {
		l.add(path, "type-union", fmt.Sprintf("type is an array %v: a branch of anyOf each", types))
	}
	if ref, ok := n["$ref"].(string); ok && ref != "" {
		switch {
		case !strings.HasPrefix(ref, "#"):
			l.add(path, "remote-ref", fmt.Sprintf("$ref %q points outside the schema", ref))
		case !resolvesIn(l.root, ref):
			l.add(path, "dangling-ref", fmt.Sprintf("$ref %q resolves to nothing in the schema (no such $defs)", ref))
		}
	}
	if keyword != "not" && !slices.ContainsFunc(lintConstraining, func(k string) bool { _, ok := n[k]; return ok }) {
		l.add(path, "untyped-schema", "the schema constrains nothing: it accepts any value")
	}
	props, _ := n["properties"].(map[string]any)
	required, _ := n["required"].([]any)
	for _, r := range required {
		name, _ := r.(string)
		if p, ok := props[name]; ok && admitsNull(p) {
			l.add(lintPath(lintPath(path, "properties"), name), "nullable-required", "a required property that may be null")
		}
	}
	for _, k := range lintSubschemaMap {
		m, _ := n[k].(map[string]any)
		for name, sub := range m {
			l.walk(sub, lintPath(lintPath(path, k), name), k)
		}
	}
	for _, k := range lintSubschemaArray {
		list, _ := n[k].([]any)
		for i, sub := range list {
			l.walk(sub, lintPath(path, k)+"["+strconv.Itoa(i)+"]", k)
		}
	}
	for _, k := range lintSubschema {
		sub, ok := n[k]
		if !ok {
			continue
		}
		if list, ok := sub.([]any); ok && k == "items" {
			for i, s := range list {
				l.walk(s, lintPath(path, k)+"["+strconv.Itoa(i)+"]", k)
			}
			continue
		}
		l.walk(sub, lintPath(path, k), k)
	}
}

// lintPath is path with one more step.
func lintPath(path, step string) string {
	if path == "" {
		return step
	}
	return path + "." + step
}

// admitsNull reports whether a schema accepts null: its type is (or
// holds) null, a branch of its anyOf or oneOf accepts it, or its enum or
// const is null.
func admitsNull(s any) bool {
	if b, ok := s.(bool); ok {
		return b
	}
	n, ok := s.(map[string]any)
	if !ok {
		return false
	}
	switch ty := n["type"].(type) {
	case string:
		if ty == "null" {
			return true
		}
	case []any:
		if slices.Contains(ty, any("null")) {
			return true
		}
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		list, _ := n[k].([]any)
		if slices.ContainsFunc(list, admitsNull) {
			return true
		}
	}
	if c, ok := n["const"]; ok && c == nil {
		return true
	}
	enum, _ := n["enum"].([]any)
	return slices.Contains(enum, nil)
}

// resolvesIn reports whether a local $ref ("#" and a JSON pointer)
// names a schema in root.
func resolvesIn(root any, ref string) bool {
	ptr := strings.TrimPrefix(ref, "#")
	if ptr == "" {
		return true
	}
	if !strings.HasPrefix(ptr, "/") {
		return false // an anchor: toolhost's schemas have none
	}
	cur := root
	for _, seg := range strings.Split(ptr[1:], "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[seg]
			if !ok {
				return false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(c) {
				return false
			}
			cur = c[i]
		default:
			return false
		}
	}
	return true
}
