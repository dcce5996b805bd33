package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/protocol"
)

// artifactTemplate is the URI template of artifacts: a command's whole
// output ("output": stdout and stderr interleaved, step markers included),
// its "stdout" or its "stderr", read in pages of whole lines.
const artifactTemplate = "toolhost://artifacts/{commandId}/{stream}{?line,limit,maxBytes}"

// artifactFiles maps a stream of the URI to its file in the command's
// artifacts directory.
var artifactFiles = map[string]string{"output": "output.log", "stdout": "stdout.log", "stderr": "stderr.log"}

// commandIDPattern is what a command id may look like in a URI: "cmd-3"
// here, "build/cmd-3" or "build#2/cmd-3" on a destination. It is compiled
// at its first use, not when the process starts.
var commandIDPattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]*(#[0-9]+)?/)?[A-Za-z0-9][A-Za-z0-9._-]*$`)
})

// farDirsCap bounds the artifacts directories of destination commands
// remembered.
const farDirsCap = 4096

// farDirs remembers where the artifacts of destination commands are: on
// the destination, under a directory toolhost names "NAME//abs/dir", which
// only the command's results tell.
type farDirs struct {
	mu sync.Mutex
	// dirs maps command ids ("build/cmd-3") to their artifacts directory,
	// the latest farDirsCap. Guarded by mu.
	dirs recent[string]
}

// note remembers the artifacts directory of res's command, if it ran on
// a destination.
func (f *farDirs) note(res *protocol.ToolResult) {
	if !strings.Contains(res.CommandID, "/") || res.Artifacts.OutputPath == "" {
		return
	}
	dir := res.Artifacts.OutputPath[:strings.LastIndex(res.Artifacts.OutputPath, "/")]
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dirs.m == nil {
		f.dirs = newRecent[string](farDirsCap)
	}
	f.dirs.put(res.CommandID, dir)
}

// dir returns the artifacts directory of a destination command.
func (f *farDirs) dir(commandID string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dirs.get(commandID)
}

// artifactURI returns the URI of a command's artifact.
func artifactURI(commandID, stream string) string {
	return "toolhost://artifacts/" + url.PathEscape(commandID) + "/" + stream
}

// addResources registers the artifacts' template.
func (s *Server) addResources() {
	s.mcp.AddResourceTemplate(&sdk.ResourceTemplate{
		Name:        "artifact",
		Title:       "Command output",
		URITemplate: artifactTemplate,
		MIMEType:    "text/plain",
		Description: "The whole output of a command of this session, as the resource_links of run_command, wait_command and cancel_command name it: stream is output (stdout and stderr interleaved), stdout or stderr. " +
			"A read returns a page of whole lines of at most maxBytes (default 1 MiB): from line (default 1), at most limit lines; _meta.nextUri reads on, and is absent at the end.",
	}, s.readArtifact)
}

// page is the part of an artifact one resources/read asks for.
type page struct {
	commandID, stream string
	line, limit       int
	maxBytes          int64
}

// parseArtifactURI parses a URI of artifactTemplate.
func parseArtifactURI(uri string) (page, error) {
	var p page
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "toolhost" || u.Host != "artifacts" {
		return p, fmt.Errorf("not an artifact URI (toolhost://artifacts/{commandId}/{stream}): %q", uri)
	}
	// The command id is one segment, escaped: "build%2Fcmd-3".
	parts := strings.Split(strings.TrimPrefix(u.EscapedPath(), "/"), "/")
	var id string
	if len(parts) == 2 {
		id, err = url.PathUnescape(parts[0])
	}
	if len(parts) != 2 || err != nil || !commandIDPattern().MatchString(id) || artifactFiles[parts[1]] == "" {
		return p, fmt.Errorf("an artifact URI is toolhost://artifacts/{commandId}/{output|stdout|stderr}, not %q", uri)
	}
	p.commandID, p.stream, p.line = id, parts[1], 1
	q := u.Query()
	for _, f := range []struct {
		name string
		set  func(int64)
	}{
		{"line", func(n int64) { p.line = int(n) }},
		{"limit", func(n int64) { p.limit = int(n) }},
		{"maxBytes", func(n int64) { p.maxBytes = n }},
	} {
		if v := q.Get(f.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 0 || (f.name == "line" && n < 1) {
				return p, fmt.Errorf("%s must be a whole number (line from 1), not %q", f.name, v)
			}
			f.set(n)
		}
	}
	return p, nil
}

// readArtifact answers resources/read of an artifact with a page of it,
// through toolhost's readFile (the artifacts directory is readable).
func (s *Server) readArtifact(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	pg, err := parseArtifactURI(req.Params.URI)
	if err != nil {
		return nil, &jsonrpc.Error{Code: protocol.CodeInvalidParams, Message: err.Error()}
	}
	if !s.reaches(req.Session, pg.commandID) {
		// Another principal's command: as if it never ran.
		return nil, sdk.ResourceNotFoundError(req.Params.URI)
	}
	info, inputs, err := s.ws.open(ctx, req.Session, req.Params.InputResponses)
	if inputs != nil {
		return &sdk.ReadResourceResult{InputRequests: inputs}, nil
	}
	if err != nil {
		return nil, protocolError(err)
	}
	limit := pg.limit
	if limit == 0 {
		// A page, not the whole file: a large artifact is cut at
		// maxBytes instead of refused.
		limit = 1 << 30
	}
	path := filepath.Join(info.Workspace.ArtifactsDir, pg.commandID, artifactFiles[pg.stream])
	if strings.Contains(pg.commandID, "/") {
		// A destination's command: its files are there, read through the
		// destination ("build//abs/path").
		dir, ok := s.far.dir(pg.commandID)
		if !ok {
			return nil, sdk.ResourceNotFoundError(req.Params.URI)
		}
		path = dir + "/" + artifactFiles[pg.stream]
	}
	// The page's text stays encoded as toolhost sent it and is spliced
	// into the answer by the transport, as read_file's is.
	var raw json.RawMessage
	err = s.th.Call(ctx, protocol.MethodReadFile, &protocol.ReadFileParams{Path: path, Line: pg.line, Limit: limit, MaxBytes: pg.maxBytes}, &raw)
	var e *protocol.Error
	if errors.As(err, &e) && e.Code == protocol.CodeNotFound {
		return nil, sdk.ResourceNotFoundError(req.Params.URI)
	}
	if err != nil {
		return nil, protocolError(err)
	}
	content, res, err := cutFileRead(raw)
	if err != nil {
		return nil, err
	}
	meta := sdk.Meta{
		"startLine": res.StartLine, "endLine": res.EndLine, "totalLines": res.TotalLines,
		"size": res.Size, "truncated": res.Truncated,
	}
	if res.EndLine < res.TotalLines {
		next := fmt.Sprintf("%s?line=%d", artifactURI(pg.commandID, pg.stream), res.EndLine+1)
		if pg.limit > 0 {
			next += fmt.Sprintf("&limit=%d", pg.limit)
		}
		if pg.maxBytes > 0 {
			next += fmt.Sprintf("&maxBytes=%d", pg.maxBytes)
		}
		meta["nextUri"] = next
	}
	c := &sdk.ResourceContents{URI: req.Params.URI, MIMEType: "text/plain", Meta: meta}
	switch {
	case res.Encoding == protocol.EncodingBase64:
		var b64 string
		if err := json.Unmarshal(content, &b64); err != nil {
			return nil, fmt.Errorf("decoding the artifact: %w", err)
		}
		b, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("decoding the artifact: %w", err)
		}
		c.MIMEType, c.Blob = "application/octet-stream", b
	case string(content) == `""`:
		// An empty page: text would be left out of the JSON, an empty blob is not.
		c.Blob = []byte{}
	default:
		placeholder, drop := s.connOf(req.Session).splice.Hold(content)
		context.AfterFunc(ctx, drop) // the answer of a cancelled read is not sent
		c.Text = placeholder
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{c}}, nil
}

// protocolError turns a toolhost error into a JSON-RPC error with the same
// code and data, for requests that have no isError result.
func protocolError(err error) error {
	var e *protocol.Error
	if !errors.As(err, &e) {
		return fmt.Errorf("%w: %v", errClosed, err)
	}
	out := &jsonrpc.Error{Code: int64(e.Code), Message: e.Message}
	if e.Data != nil {
		if b, merr := json.Marshal(e.Data); merr == nil {
			out.Data = b
		}
	}
	return out
}
