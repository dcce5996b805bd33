// Command tsgen writes, from the Go declarations of toolhost's protocol, the
// extension's TypeScript twin of them and the reference part of PROTOCOL.md.
// protocol/doc.go carries
//
//	//go:generate go run ../internal/tsgen -out ../editor-extension/src/protocol.ts -md ../PROTOCOL.md -codes errors.go lifecycle.go … errors.go
//
// so `go generate ./protocol` refreshes editor-extension/src/protocol.ts and the
// part of PROTOCOL.md between its "<!-- BEGIN GENERATED" and
// "<!-- END GENERATED -->" lines; the tests in this package run that same
// line and fail when either checked-in output drifts from the Go.
//
// It reads the Go source with go/parser (no type checking, so it needs
// nothing but the files): the type files given as arguments, and the codes
// file, whose Code… constants are the error codes.
//
// The TypeScript maps, in declaration order:
//
//   - struct types → interfaces, field names from the json tags; `omitempty`,
//     `omitzero` and pointer fields are optional, and so is a field whose
//     doc states its default ("Default: …"); embedded structs → extends;
//   - []T → T[], []byte → string (base64), map[K]V → Record<string, V>;
//   - json.RawMessage, any, interface{} → unknown; time.Time → string;
//     time.Duration and all numbers → number;
//   - `type X string` with typed constants → a union of their values;
//   - a type whose doc has a `//tsgen:type T` line → T (for types with their
//     own MarshalJSON);
//   - string and number constants, and the error codes → exported consts;
//   - each descriptor `X = RequestType[P, R](method)` or
//     `X = NotificationType[P](method)` → a vscode-jsonrpc RequestType or
//     NotificationType; params whose type is null (`//tsgen:type null`) make
//     a RequestType0 or NotificationType0, and a null result is `null`;
//   - doc comments → JSDoc.
//
// The Markdown has a section per var block of descriptors, titled by the
// block doc's first sentence, and in it a section per descriptor: its doc
// (without its leading name), its params and result, and the errors its doc
// lists in a paragraph "Errors …:" followed by a list whose every item
// starts with a link to a code constant ("  - [CodeNotFound]: when"). A
// struct type is shown in the section of the one descriptor that takes it
// as params or result, else of the only one that reaches it, else under
// Types; each as a table of its fields (JSON name, type, required, doc).
// Last comes the table of error codes.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	outs, err := plan(".", os.Args[1:])
	if err != nil {
		fatal(err)
	}
	for _, o := range outs {
		if o.path == "" {
			os.Stdout.Write(o.content)
			continue
		}
		if err := os.WriteFile(o.path, o.content, 0o644); err != nil {
			fatal(err)
		}
	}
}

// output is a file to write; path "" is stdout.
type output struct {
	path    string
	content []byte
}

// plan runs the generator on the command line args, with every path
// relative to dir, and returns what it would write.
func plan(dir string, args []string) ([]output, error) {
	fs := flag.NewFlagSet("tsgen", flag.ContinueOnError)
	out := fs.String("out", "", "TypeScript file to write (default: stdout, unless -md is given)")
	mdFile := fs.String("md", "", "Markdown file whose generated part to rewrite")
	codesFile := fs.String("codes", "", "Go file with the error codes (Code… constants)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	typeFiles := fs.Args()
	if len(typeFiles) == 0 {
		typeFiles = []string{"protocol.go"}
	}
	read := func(name string) (source, error) {
		path := filepath.Join(dir, name)
		src, err := os.ReadFile(path)
		return source{name: sourceName(path), src: src}, err
	}
	var srcs []source
	for _, name := range typeFiles {
		s, err := read(name)
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, s)
	}
	var codes *source
	if *codesFile != "" {
		s, err := read(*codesFile)
		if err != nil {
			return nil, err
		}
		codes = &s
	}
	p, err := load(srcs, codes)
	if err != nil {
		return nil, err
	}

	var outs []output
	if *out != "" || *mdFile == "" {
		ts, err := p.typeScript()
		if err != nil {
			return nil, err
		}
		path := ""
		if *out != "" {
			path = filepath.Join(dir, *out)
		}
		outs = append(outs, output{path: path, content: ts})
	}
	if *mdFile != "" {
		region, err := p.markdown()
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, *mdFile)
		doc, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		doc, err = splice(doc, region)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		outs = append(outs, output{path: path, content: doc})
	}
	return outs, nil
}

// sourceName names an input as headers show it, by its directory and
// base name: protocol/commands.go.
func sourceName(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return filepath.Join(filepath.Base(filepath.Dir(abs)), filepath.Base(abs))
	}
	return path
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "tsgen:", err)
	os.Exit(1)
}
