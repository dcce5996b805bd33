package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/txtar"
)

// TestScripts runs every testdata/*.txtar script against the real binary,
// in each framing it names, and compares what the server sent with the
// script's -- server -- section after normalising volatile fields. Run
// with -update to rewrite those sections.
//
// A script's comment says what it checks and may set:
//
//	framings: header ndjson   the framings to run in (default: both)
//	args: --flag value ...    more server flags ($ROOT, $OUTSIDE, $STATE expand)
//
// Its -- client -- section is a list of directives, one a line:
//
//	init [PARAMS] [FIELD ...]
//	              the handshake: send initialize with the params object
//	              PARAMS (default {}) and id "init", wait for its answer,
//	              fail the script unless it is a success, then send the
//	              initialized notification. The transcript holds the line
//	              "init ok" in the answer's place instead of the answer,
//	              followed by the result's FIELDs (dotted paths such as
//	              workspace.root), if named, as one JSON object. Only
//	              lifecycle_initialize_answer may spell out the whole
//	              answer (the test fails any other that does); scripts
//	              that test initialize itself send it with send. For
//	              example: init {"rootPath":"$ROOT/sub"} workspace.root
//	send JSON     frame and send a message; wait for the response to a
//	              request, or for the batch answer to a batch with a request
//	notify JSON   frame and send a message; wait for nothing
//	raw TEXT      frame and send TEXT as it is; wait for one null-id answer
//	bytes "Q"     write the Go-quoted bytes Q unframed; wait for nothing
//	null          wait for one more null-id answer
//	await METHOD  wait for the next notification METHOD not yet awaited
//	close         close stdin and wait for the exit code
//
// Sections named root/PATH are files written into the root first; files
// under $OUTSIDE/secret.txt exist outside it. Heartbeats are left out of
// the transcript (their number depends on timing).
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txtar")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scripts in testdata")
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".txtar")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			sc := parseScript(t, ar)
			var got string
			for i, fr := range sc.framings {
				out := runScript(t, sc, fr)
				if i == 0 {
					got = out
				} else if out != got {
					t.Errorf("%s framing differs from %s: mismatch (-%s +%s):\n%s", fr, sc.framings[0], sc.framings[0], fr, cmp.Diff(got, out))
				}
			}
			if name != answerScript && spellsOutInitialize(got) {
				t.Errorf("the transcript holds a whole initialize answer; only %s may, the others start with init", answerScript)
			}
			if *update {
				setSection(ar, "server", got)
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if diff := cmp.Diff(section(ar, "server"), got); diff != "" {
				t.Errorf("server messages mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// answerScript is the one script whose transcript spells out the whole
// initialize answer, so that a change to the answer changes one file.
const answerScript = "lifecycle_initialize_answer"

// spellsOutInitialize reports whether a transcript holds a successful
// initialize answer, recognised by its capabilities and serverInfo.
func spellsOutInitialize(transcript string) bool {
	for _, line := range strings.Split(transcript, "\n") {
		var m struct {
			Result struct {
				Capabilities json.RawMessage `json:"capabilities"`
				ServerInfo   json.RawMessage `json:"serverInfo"`
			} `json:"result"`
		}
		if json.Unmarshal([]byte(line), &m) == nil && m.Result.Capabilities != nil && m.Result.ServerInfo != nil {
			return true
		}
	}
	return false
}

// script is a parsed txtar script.
type script struct {
	framings []string
	args     []string
	client   []string
	files    map[string][]byte
}

// parseScript reads a script's settings and sections.
func parseScript(t *testing.T, ar *txtar.Archive) script {
	sc := script{framings: framings, files: map[string][]byte{}}
	for _, line := range strings.Split(string(ar.Comment), "\n") {
		if v, ok := strings.CutPrefix(line, "framings:"); ok {
			sc.framings = strings.Fields(v)
		}
		if v, ok := strings.CutPrefix(line, "args:"); ok {
			sc.args = strings.Fields(v)
		}
	}
	for _, f := range ar.Files {
		if p, ok := strings.CutPrefix(f.Name, "root/"); ok {
			sc.files[p] = f.Data
		}
	}
	for _, line := range strings.Split(section(ar, "client"), "\n") {
		if strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "#") {
			sc.client = append(sc.client, line)
		}
	}
	if len(sc.client) == 0 {
		t.Fatal("script has no -- client -- directives")
	}
	return sc
}

// section returns the text of the section named name.
func section(ar *txtar.Archive, name string) string {
	for _, f := range ar.Files {
		if f.Name == name {
			return string(f.Data)
		}
	}
	return ""
}

// setSection replaces or adds the section named name.
func setSection(ar *txtar.Archive, name, data string) {
	for i, f := range ar.Files {
		if f.Name == name {
			ar.Files[i].Data = []byte(data)
			return
		}
	}
	ar.Files = append(ar.Files, txtar.File{Name: name, Data: []byte(data)})
}

// runScript plays a script in one framing and returns the transcript.
func runScript(t *testing.T, sc script, framing string) string {
	root := t.TempDir()
	outside := t.TempDir()
	artifacts := filepath.Join(t.TempDir(), "artifacts")
	for p, data := range sc.files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("outside secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, _ = filepath.EvalSymlinks(root)
	outside, _ = filepath.EvalSymlinks(outside)
	// A state directory of the script's own, which every command is
	// denied: the user's would show in the results as a path of this
	// machine.
	state, _ := filepath.EvalSymlinks(t.TempDir())
	if err := os.Chmod(state, 0o700); err != nil {
		t.Fatal(err)
	}
	expand := strings.NewReplacer("$ROOT", root, "$OUTSIDE", outside, "$ARTIFACTS", artifacts, "$STATE", state).Replace
	args := []string{"--artifacts-dir", artifacts, "--state-dir", state}
	for _, a := range sc.args {
		args = append(args, expand(a))
	}
	s := start(t, options{framing: framing, root: root, args: args})

	norm := strings.NewReplacer(artifacts, "$ARTIFACTS", root, "$ROOT", outside, "$OUTSIDE", state, "$STATE").Replace
	awaited := map[string]int{}
	nulls := 0
	closed := false
	// shortcut holds the transcript line that stands for each answer to
	// an init directive, by the answer's index among the messages.
	shortcut := map[int]string{}
	waitNull := func() {
		nulls++
		n := 0
		s.waitFor(0, fmt.Sprintf("null-id answer #%d", nulls), func(m msg) bool {
			if m.Method == "" && isNullID(m.ID) && m.batch == nil {
				n++
			}
			return n == nulls
		})
	}
	for _, line := range sc.client {
		verb, arg, _ := strings.Cut(line, " ")
		arg = expand(arg)
		switch verb {
		case "init":
			i, line := initialize(t, s, arg, norm)
			shortcut[i] = line
		case "send":
			from := s.count()
			s.send([]byte(arg))
			waitAnswer(t, s, from, []byte(arg))
		case "notify":
			s.send([]byte(arg))
		case "raw":
			s.send([]byte(arg))
			waitNull()
		case "bytes":
			b, err := strconv.Unquote(arg)
			if err != nil {
				t.Fatalf("bytes %s: %v", arg, err)
			}
			s.write([]byte(b))
		case "null":
			waitNull()
		case "await":
			awaited[arg]++
			s.notification(arg, awaited[arg], nil, nil)
		case "close":
			s.closeStdin()
			s.wait()
			closed = true
		default:
			t.Fatalf("unknown directive %q", line)
		}
	}
	var b strings.Builder
	s.mu.Lock()
	msgs := append([]msg(nil), s.msgs...)
	s.mu.Unlock()
	for i, m := range msgs {
		if m.Method == "heartbeat" {
			continue
		}
		if line, ok := shortcut[i]; ok {
			b.WriteString(line)
			b.WriteByte('\n')
			continue
		}
		b.WriteString(normalize(t, m.raw, norm))
		b.WriteByte('\n')
	}
	if closed {
		fmt.Fprintf(&b, "exit %d\n", s.exit)
	}
	return b.String()
}

// initID is the request id of the init directive's initialize.
const initID = `"init"`

// initialize plays an init directive whose argument is arg: it sends
// initialize, fails the test unless the answer is a success, and sends
// initialized. It returns the answer's index among the messages and the
// transcript line that stands for it: "init ok", then the result's named
// fields as one normalised JSON object, if any were named.
func initialize(t *testing.T, s *server, arg string, paths func(string) string) (int, string) {
	t.Helper()
	params := json.RawMessage(`{}`)
	rest := strings.TrimSpace(arg)
	if strings.HasPrefix(rest, "{") {
		dec := json.NewDecoder(strings.NewReader(rest))
		if err := dec.Decode(&params); err != nil {
			t.Fatalf("init %s: params: %v", arg, err)
		}
		rest = rest[dec.InputOffset():]
	}
	fields := strings.Fields(rest)
	s.send([]byte(`{"jsonrpc":"2.0","id":` + initID + `,"method":"initialize","params":` + string(params) + `}`))
	answer, i := s.waitFor(0, "the answer to init", func(m msg) bool { return m.Method == "" && string(m.ID) == initID })
	var reply struct {
		Result map[string]any  `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(answer.raw, &reply); err != nil {
		t.Fatalf("init: decoding the answer %s: %v", answer.raw, err)
	}
	if reply.Error != nil || reply.Result == nil {
		t.Fatalf("init: initialize did not succeed: %s", answer.raw)
	}
	s.send([]byte(`{"jsonrpc":"2.0","method":"initialized","params":{}}`))
	line := "init ok"
	if len(fields) > 0 {
		picked := map[string]any{}
		for _, f := range fields {
			pick(t, picked, reply.Result, f)
		}
		raw, err := json.Marshal(picked)
		if err != nil {
			t.Fatal(err)
		}
		line += " " + normalize(t, raw, paths)
	}
	return i, line
}

// pick copies the value at the dotted path from result into dst, under
// the same path, and fails the test if result has no such value.
func pick(t *testing.T, dst, result map[string]any, path string) {
	t.Helper()
	keys := strings.Split(path, ".")
	from, to := result, dst
	for n, k := range keys {
		v, ok := from[k]
		if !ok {
			t.Fatalf("init: the answer has no field %s", path)
		}
		if n == len(keys)-1 {
			to[k] = v
			return
		}
		if from, ok = v.(map[string]any); !ok {
			t.Fatalf("init: the answer's %s is not an object", strings.Join(keys[:n+1], "."))
		}
		next, _ := to[k].(map[string]any)
		if next == nil {
			next = map[string]any{}
			to[k] = next
		}
		to = next
	}
}

// waitAnswer waits for the answer to a message just sent: the response to
// a request, or the batch answer to a batch holding a request, received at
// or after index from.
func waitAnswer(t *testing.T, s *server, from int, body []byte) {
	t.Helper()
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		var raws []json.RawMessage
		if json.Unmarshal(body, &raws) != nil {
			return
		}
		members := make([]map[string]json.RawMessage, len(raws))
		for i, r := range raws {
			json.Unmarshal(r, &members[i]) // a member that is not an object stays nil
		}
		// Only a batch of nothing but notifications goes unanswered.
		calls := false
		var probe []json.RawMessage
		json.Unmarshal(body, &probe)
		for i, m := range members {
			if _, ok := m["id"]; ok || !bytes.HasPrefix(bytes.TrimSpace(probe[i]), []byte("{")) {
				calls = true
			}
		}
		if calls || len(members) == 0 {
			s.waitFor(from, "a batch answer", func(m msg) bool {
				return m.batch != nil || (len(members) == 0 && isNullID(m.ID) && m.Method == "")
			})
		}
		return
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return
	}
	id, ok := m["id"]
	if !ok {
		return
	}
	want := string(bytes.TrimSpace(id))
	s.waitFor(0, "the response to "+want, func(m msg) bool { return m.Method == "" && string(m.ID) == want })
}

// isNullID reports whether an id is absent or null.
func isNullID(id json.RawMessage) bool { return id == nil || string(id) == "null" }

// Volatile fields, replaced by placeholders in transcripts.
var (
	timeKeys = map[string]bool{"startedAt": true, "endedAt": true, "ts": true, "mtime": true, "updatedAt": true, "lastHeartbeatAt": true}
	pidKeys  = map[string]bool{"pid": true, "processGroupId": true, "processId": true}
	msKeys   = map[string]bool{"durationMs": true, "elapsedMs": true}
)

// normalize rewrites a message with volatile fields replaced and paths
// abstracted, keys sorted, compact.
func normalize(t *testing.T, raw json.RawMessage, paths func(string) string) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("normalize %s: %v", raw, err)
	}
	v = normalizeValue("", v, paths)
	if members, ok := v.([]any); ok {
		// A batch's answers come in the order their requests finished,
		// which JSON-RPC leaves open.
		slices.SortFunc(members, func(a, b any) int {
			x, _ := json.Marshal(a)
			y, _ := json.Marshal(b)
			return bytes.Compare(x, y)
		})
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(buf.String())
}

func normalizeValue(key string, v any, paths func(string) string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeValue(k, e, paths)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = normalizeValue(key, e, paths)
		}
		return x
	case string:
		if timeKeys[key] {
			return "<time>"
		}
		switch key {
		case "version":
			return "<version>"
		case "framing":
			return "<framing>"
		case "sessionId":
			return "<session>"
		}
		return paths(x)
	case float64:
		switch {
		case pidKeys[key]:
			return "<pid>"
		case msKeys[key]:
			return "<ms>"
		}
	}
	return v
}
