package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the fixture's outputs in testdata/")

// fixtureArgs generate the fixture's outputs in testdata/, as rpc's
// go:generate line does for the protocol.
var fixtureArgs = []string{"-out", "protocol.ts", "-md", "PROTOCOL.md", "-codes", "errors.go", "protocol.go", "methods.go"}

// The generator's outputs for a fixture that uses every mapped shape.
func TestFixture(t *testing.T) {
	if *update {
		outs, err := plan("testdata", fixtureArgs)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			if err := os.WriteFile(o.path, o.content, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkOutputs(t, "testdata", fixtureArgs, "the fixture's", "go test ./internal/tsgen -run TestFixture -update")
}

// The checked-in editor-extension/src/protocol.ts, and the generated part
// of PROTOCOL.md, must be what `go generate ./protocol` makes from protocol/ today.
// The test runs protocol's own go:generate line, so it checks exactly what that
// line writes.
func TestCheckedInOutputsMatchGo(t *testing.T) {
	dir := filepath.Join("..", "..", "protocol")
	args, err := generateArgs(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkOutputs(t, dir, args, "protocol/'s", "go generate ./protocol")
}

// checkOutputs runs the generator with args in dir and compares what it
// would write with the files there: a TypeScript file whole, a Markdown
// file only between its markers (the rest is hand-written). fix says how to
// regenerate them.
func checkOutputs(t *testing.T, dir string, args []string, whose, fix string) {
	t.Helper()
	outs, err := plan(dir, args)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) == 0 {
		t.Fatalf("tsgen %s writes nothing", strings.Join(args, " "))
	}
	for _, o := range outs {
		got, err := os.ReadFile(o.path)
		if err != nil {
			t.Errorf("%v (run: %s)", err, fix)
			continue
		}
		want := o.content
		if filepath.Ext(o.path) == ".md" {
			if want, err = region(want); err != nil {
				t.Fatal(err)
			}
			if got, err = region(got); err != nil {
				t.Errorf("%s: %v", o.path, err)
				continue
			}
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("%s drifted from %s Go declarations; run `%s` and commit it. mismatch (-want +got):\n%s", o.path, whose, fix, diff)
		}
	}
}

// region returns a document's generated part.
func region(doc []byte) ([]byte, error) {
	start, end, err := generatedPart(doc)
	if err != nil {
		return nil, err
	}
	return doc[start:end], nil
}

// generateArgs returns the arguments of the go:generate line of dir's Go
// files that runs tsgen.
func generateArgs(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	const prefix = "//go:generate go run ../internal/tsgen"
	var found []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(src), "\n") {
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				if found != nil {
					return nil, errors.New("two go:generate lines run tsgen")
				}
				found = strings.Fields(rest)
			}
		}
	}
	if found == nil {
		return nil, errors.New("no go:generate line runs tsgen (" + prefix + ")")
	}
	return found, nil
}

func TestSplice(t *testing.T) {
	region := []byte("<!-- BEGIN GENERATED new -->\nfresh\n<!-- END GENERATED -->\n")
	for _, tc := range []struct {
		name, doc, want string
		err             bool
	}{
		{
			name: "replaces the part, markers included, and keeps the rest",
			doc:  "# T\n\nbefore\n<!-- BEGIN GENERATED old -->\nstale\nlines\n<!-- END GENERATED -->\nafter\n",
			want: "# T\n\nbefore\n<!-- BEGIN GENERATED new -->\nfresh\n<!-- END GENERATED -->\nafter\n",
		},
		{
			name: "an end marker on the last line without a newline",
			doc:  "before\n<!-- BEGIN GENERATED -->\nstale\n<!-- END GENERATED -->",
			want: "before\n<!-- BEGIN GENERATED new -->\nfresh\n<!-- END GENERATED -->\n",
		},
		{
			name: "CRLF lines",
			doc:  "before\r\n<!-- BEGIN GENERATED -->\r\nstale\r\n<!-- END GENERATED -->\r\nafter\r\n",
			want: "before\r\n<!-- BEGIN GENERATED new -->\nfresh\n<!-- END GENERATED -->\nafter\r\n",
		},
		{name: "no markers", doc: "# T\n", err: true},
		{name: "no end marker", doc: "<!-- BEGIN GENERATED -->\nx\n", err: true},
		{name: "end before begin", doc: "<!-- END GENERATED -->\n<!-- BEGIN GENERATED -->\n", err: true},
		{name: "two begin markers", doc: "<!-- BEGIN GENERATED -->\n<!-- BEGIN GENERATED -->\n<!-- END GENERATED -->\n", err: true},
		{name: "two parts", doc: "<!-- BEGIN GENERATED -->\n<!-- END GENERATED -->\n<!-- BEGIN GENERATED -->\n<!-- END GENERATED -->\n", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := splice([]byte(tc.doc), region)
			if tc.err {
				if err == nil {
					t.Fatalf("splice succeeded: %q", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// A descriptor's errors list must name codes that exist, each item first.
func TestErrorsListIsChecked(t *testing.T) {
	const types = `package p

type RequestType[P, R any] string

// Params are the params.
type Params struct{}

// Requests.
var (
	// XRequest does x.
	//
	// Errors:
	//   - ITEM
	XRequest = RequestType[Params, Params]("x")
)
`
	codes := source{name: "p/errors.go", src: []byte("package p\n\nconst CodeNotFound = -32003\n")}
	for item, wantErr := range map[string]string{
		"[CodeNotFound]: the file does not exist.": "",
		"[CodeNotFound] the file does not exist.":  "",
		"[CodeMissing]: no such code.":             "does not start with a link to an error code",
		"the file does not exist: [CodeNotFound].": "does not start with a link to an error code",
	} {
		p, err := load([]source{{name: "p/methods.go", src: []byte(strings.Replace(types, "ITEM", item, 1))}}, &codes)
		if err != nil {
			t.Fatal(err)
		}
		md, err := p.markdown()
		switch {
		case wantErr == "" && err != nil:
			t.Errorf("item %q: %v", item, err)
		case wantErr == "" && !bytes.Contains(md, []byte("| -32003 | NotFound | the file does not exist. |")):
			t.Errorf("item %q: no row for it in:\n%s", item, md)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("item %q: error %v, want one saying %q", item, err, wantErr)
		}
	}
}

// A block of descriptors titles its section with its doc; without one the
// generator says so.
func TestDescriptorBlockNeedsDoc(t *testing.T) {
	src := []byte(`package p

type NotificationType[P any] string

// Params are the params.
type Params struct{}

var (
	XNotification = NotificationType[Params]("x")
)
`)
	p, err := load([]source{{name: "p/methods.go", src: src}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.markdown(); err == nil || !strings.Contains(err.Error(), "needs a doc comment") {
		t.Errorf("markdown() error = %v, want one saying the block needs a doc comment", err)
	}
}

func TestDropName(t *testing.T) {
	for _, tc := range []struct {
		in, name string
		verb     bool
		want     string
	}{
		{"Argv is the command.", "Argv", false, "the command."},
		{"Steps are the steps.", "Steps", false, "the steps."},
		{"Stdout and Stderr keep the head.", "Stdout", false, "Stdout and Stderr keep the head."},
		{"RunCommandRequest runs a command.", "RunCommandRequest", true, "Runs a command."},
		{"Run a command.", "RunCommandRequest", true, "Run a command."},
		{"Argvs are not Argv.", "Argv", false, "Argvs are not Argv."},
	} {
		if got := dropName(tc.in, tc.name, tc.verb); got != tc.want {
			t.Errorf("dropName(%q, %q, %v) = %q, want %q", tc.in, tc.name, tc.verb, got, tc.want)
		}
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Request `runCommand`":                        "request-runcommand",
		"Notification `$/progress`":                   "notification-progress",
		"Request `window/workDoneProgress/create`":    "request-windowworkdoneprogresscreate",
		"Type `ToolResult`":                           "type-toolresult",
		"Notifications and requests the server sends": "notifications-and-requests-the-server-sends",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPropName(t *testing.T) {
	for in, want := range map[string]string{"argv": "argv", "$/progress": `"$/progress"`, "a-b": `"a-b"`, "x1": "x1", "1x": `"1x"`} {
		if got := propName(in); got != want {
			t.Errorf("propName(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestCodesFileAlsoATypeFile writes each error code once when the codes
// file is also given as a type file (as protocol's errors.go is, for
// ErrorData): twice would be a TypeScript redeclaration.
func TestCodesFileAlsoATypeFile(t *testing.T) {
	outs, err := plan("testdata", []string{"-codes", "errors.go", "protocol.go", "methods.go", "errors.go"})
	if err != nil {
		t.Fatal(err)
	}
	ts := string(outs[0].content)
	for _, line := range strings.Split(ts, "\n") {
		name, ok := strings.CutPrefix(line, "export const Code")
		if !ok {
			continue
		}
		name = "export const Code" + name[:strings.Index(name, " ")]
		if n := strings.Count(ts, name+" "); n != 1 {
			t.Errorf("%s written %d times, want once", name, n)
		}
	}
}
