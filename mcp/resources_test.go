package mcp

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseArtifactURI reads the command id, escaped as one segment when
// it names a destination, the stream and the page of an artifact's URI,
// and refuses what is not one.
func TestParseArtifactURI(t *testing.T) {
	for uri, want := range map[string]page{
		"toolhost://artifacts/cmd-3/output":                 {commandID: "cmd-3", stream: "output", line: 1},
		"toolhost://artifacts/cmd-3/stderr?line=5&limit=10": {commandID: "cmd-3", stream: "stderr", line: 5, limit: 10},
		artifactURI("build/cmd-3", "stdout"):                {commandID: "build/cmd-3", stream: "stdout", line: 1},
		artifactURI("build#2/cmd-1", "output") + "?line=2":  {commandID: "build#2/cmd-1", stream: "output", line: 2},
	} {
		got, err := parseArtifactURI(uri)
		if err != nil {
			t.Errorf("parseArtifactURI(%q): %v", uri, err)
			continue
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(page{})); diff != "" {
			t.Errorf("parseArtifactURI(%q) mismatch (-want +got):\n%s", uri, diff)
		}
	}
	for _, uri := range []string{
		"toolhost://artifacts/build/cmd-3/output", // the id's slash unescaped
		"toolhost://artifacts/../cmd-3/output",
		"toolhost://artifacts/" + "%2E%2E%2Fcmd-3/output",
		"toolhost://artifacts/cmd-3/secrets",
		"file:///etc/passwd",
	} {
		if _, err := parseArtifactURI(uri); err == nil {
			t.Errorf("parseArtifactURI(%q) accepted it", uri)
		}
	}
}
