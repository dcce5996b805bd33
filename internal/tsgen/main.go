// Command tsgen writes the TypeScript twin of the protocol types in
// rpc/protocol.go, for the VS Code extension. rpc/protocol.go carries
//
//	//go:generate go run ../internal/tsgen -out ../editor-extension/src/protocol.ts
//
// so `go generate ./rpc` refreshes editor-extension/src/protocol.ts; the test
// in this package fails when the checked-in file drifts from the Go types.
//
// It reads the Go source with go/parser (no type checking, so it needs nothing
// but the file) and maps, in declaration order:
//
//   - struct types → interfaces, field names from the json tags; `omitempty`,
//     `omitzero` and pointer fields are optional; embedded structs → extends;
//   - []T → T[], []byte → string (base64), map[K]V → Record<string, V>;
//   - json.RawMessage, any, interface{} → unknown; time.Time → string;
//     time.Duration and all numbers → number;
//   - `type X string` with typed constants → a union of their values;
//   - string and number constants → exported consts;
//   - doc comments → JSDoc.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	in := flag.String("in", "protocol.go", "Go file with the protocol types")
	out := flag.String("out", "", "TypeScript file to write (default: stdout)")
	flag.Parse()

	src, err := os.ReadFile(*in)
	if err != nil {
		fatal(err)
	}
	ts, err := Generate(sourceName(*in), src)
	if err != nil {
		fatal(err)
	}
	if *out == "" {
		os.Stdout.Write(ts)
		return
	}
	if err := os.WriteFile(*out, ts, 0o644); err != nil {
		fatal(err)
	}
}

// sourceName names the input as the header shows it: rpc/protocol.go when run
// from the rpc directory by go generate.
func sourceName(in string) string {
	if abs, err := filepath.Abs(in); err == nil {
		return filepath.Join(filepath.Base(filepath.Dir(abs)), filepath.Base(abs))
	}
	return in
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "tsgen:", err)
	os.Exit(1)
}
