package main

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/protocol.ts from testdata/protocol.go")

// The generator's output for a fixture that uses every mapped shape.
func TestFixture(t *testing.T) {
	src, err := os.ReadFile("testdata/protocol.go")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Generate("testdata/protocol.go", src)
	if err != nil {
		t.Fatal(err)
	}
	golden := "testdata/protocol.ts"
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("generated TypeScript for the fixture mismatch (-want +got):\n%s", diff)
	}
}

// The checked-in editor-extension/src/protocol.ts must be what `go generate
// ./rpc` makes from rpc/protocol.go today.
func TestCheckedInProtocolTSMatchesGoTypes(t *testing.T) {
	goFile := filepath.Join("..", "..", "rpc", "protocol.go")
	tsFile := filepath.Join("..", "..", "editor-extension", "src", "protocol.ts")
	src, err := os.ReadFile(goFile)
	if os.IsNotExist(err) {
		t.Skip("rpc/protocol.go does not exist yet")
	}
	if err != nil {
		t.Fatal(err)
	}
	want, err := Generate("rpc/protocol.go", src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(tsFile)
	if err != nil {
		t.Fatalf("%v (run: go generate ./rpc)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("editor-extension/src/protocol.ts drifted from rpc/protocol.go; run `go generate ./rpc` and commit it. mismatch (-want +got):\n%s", diff)
	}
}

func TestPropName(t *testing.T) {
	for in, want := range map[string]string{"argv": "argv", "$/progress": `"$/progress"`, "a-b": `"a-b"`, "x1": "x1", "1x": `"1x"`} {
		if got := propName(in); got != want {
			t.Errorf("propName(%q) = %s, want %s", in, got, want)
		}
	}
}
