package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The figures of issue 34 about what toolhost mcp puts into a model's
// context: tools/list's size, the MCP Inspector's portability findings in
// its schemas, and what naming the allowed hosts in the instructions
// costs initialize.

// mcp-schemas runs after the figures of figures.go (-only mcp-schemas
// runs it alone).
func init() { figures = append(figures, figure{"mcp-schemas", (*bench).mcpSchemas}) }

// toolsListTarget is the most bytes tools/list may take, compact.
const toolsListTarget = 16 << 10

// inspectorPackage is the MCP Inspector the findings are counted with,
// run through npm exec (as integration/mcpnode/inspector.test.mjs does).
const inspectorPackage = "@modelcontextprotocol/inspector@2.12.0"

// mcpSchemas measures tools/list of a default toolhost mcp at MCP
// 2025-11-25 (the largest form: its task tools say execution), counts
// the Inspector's --strict findings in its schemas, and times spawn →
// initialize answered with the instructions naming the registries' hosts,
// against the same without --network-allow-registries.
func (b *bench) mcpSchemas() error {
	s, _, err := b.startRawMCPAt("mcp-schemas", "2025-11-25")
	if err != nil {
		return err
	}
	raw, err := s.request("tools/list", map[string]any{})
	s.end()
	if err != nil {
		return err
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return err
	}
	var list struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(compact.Bytes(), &list); err != nil {
		return err
	}
	var sizes []string
	for _, t := range list.Tools {
		var name struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(t, &name); err != nil {
			return err
		}
		sizes = append(sizes, fmt.Sprintf("%s %d", name.Name, len(t)))
	}
	b.add(row{Figure: "MCP `tools/list` of `toolhost mcp`, compact JSON (2025-11-25)", Value: fmt.Sprintf("%d bytes, %d tools", compact.Len(), len(list.Tools)),
		Target: fmt.Sprintf("≤ %d bytes", toolsListTarget), Met: met(compact.Len() <= toolsListTarget),
		Why: "per tool (its name, title, description, schemas and annotations), in bytes: " + strings.Join(sizes, ", ") + "."})
	b.note("MCP `tools/list`: the result of one `tools/list` of a default `toolhost mcp` (snapshots offered, no destination) at MCP 2025-11-25, as the server wrote it, compacted (it already is); per tool, in bytes: %s.", strings.Join(sizes, ", "))

	if findings, err := b.inspectorFindings(); err != nil {
		b.add(row{Figure: "MCP Inspector `--strict` findings in the schemas of `tools/list`", Value: "not measured: " + err.Error()})
	} else {
		b.add(row{Figure: "MCP Inspector `--strict` findings in the schemas of `tools/list`", Value: fmt.Sprint(findings), Target: "0", Met: met(findings == 0)})
		b.note("MCP Inspector findings: `npm exec --package=%s -- mcp-inspector --cli --method tools/list --strict --format json -- toolhost mcp --root DIR`, the findings of its `schemaFindings` counted, warnings and errors alike.", inspectorPackage)
	}

	dir := filepath.Join(b.work, "mcp-initialize")
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"toolhost-bench","version":"1"}}}`
	kinds := [][]string{
		{b.bin, "mcp", "--root", root, "--log-level", "warn"},
		{b.bin, "mcp", "--root", root, "--log-level", "warn", "--network-allow-registries=false"},
	}
	warm, n := 3, b.iters(40, 10)
	got := make([]durations, len(kinds))
	for i := range warm + n {
		for k, argv := range kinds {
			d, err := spawnToAnswer(argv, root, initialize, `"instructions"`, "")
			if err != nil {
				return fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
			}
			if i >= warm {
				got[k] = append(got[k], d)
			}
		}
	}
	with, without := got[0].pct(50), got[1].pct(50)
	b.add(row{Figure: "spawn → MCP `initialize` answered, the instructions naming the registries' hosts, p50", Value: fmtDur(with),
		Baseline: "without `--network-allow-registries`: " + fmtDur(without), Ratio: ratio(float64(with), float64(without))})
	b.note("MCP `initialize` with the registries' hosts: %d rounds (after %d to warm up), interleaved, each spawning `toolhost mcp --root DIR` (the agents' defaults: the registries' hosts read from the start, and waited for, up to 5 s, by initialize, whose instructions name them) and the same with `--network-allow-registries=false`, timed from before the fork to initialize's answer read (MCP 2025-11-25); medians.", n, warm)
	return nil
}

// inspectorFindings runs the MCP Inspector's CLI with --strict on
// tools/list of a default toolhost mcp and returns how many findings it
// reports.
func (b *bench) inspectorFindings() (int, error) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		return 0, fmt.Errorf("npm not found")
	}
	root := filepath.Join(b.work, "mcp-inspector")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return 0, err
	}
	cmd := exec.Command(npm, "exec", "--yes", "--package="+inspectorPackage, "--", "mcp-inspector",
		"--cli", "--method", "tools/list", "--strict", "--format", "json", "--", b.bin, "mcp", "--root", root, "--log-level", "warn")
	cmd.Dir = root
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("%v: %.300s", err, stderr.String())
	}
	var res struct {
		SchemaFindings []struct {
			Findings []json.RawMessage `json:"findings"`
		} `json:"schemaFindings"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return 0, fmt.Errorf("its output %.200q: %v", out, err)
	}
	n := 0
	for _, t := range res.SchemaFindings {
		n += len(t.Findings)
	}
	return n, nil
}
