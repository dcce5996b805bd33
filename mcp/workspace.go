package mcp

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolhost/toolhost/protocol"
)

// rootsInput is the id of the roots input request a first tools/call or
// resources/read makes of a client that offers roots.
const rootsInput = "toolhost/roots"

// workspace opens toolhost's session once, on the first request that needs
// it, with the roots the MCP client offers.
type workspace struct {
	s *Server

	// mu serializes opening: the first caller initializes, the others wait
	// and share its outcome.
	mu sync.Mutex
	// opened says initialize was tried; info or err is its outcome. Guarded
	// by mu; never changed once opened is set.
	opened bool
	info   *protocol.InitializeResult
	err    error
}

// open returns toolhost's session, initializing it on the first call. When
// the client offers roots and none came with this request, it returns the
// input requests to make first (the SDK asks a client of a protocol
// version before 2026-07-28 itself, with roots/list, and calls again).
func (w *workspace) open(ctx context.Context, ss *sdk.ServerSession, responses sdk.InputResponseMap) (*protocol.InitializeResult, sdk.InputRequestMap, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.opened {
		return w.info, nil, w.err
	}
	var roots []*sdk.Root
	if offersRoots(ss) {
		r, ok := responses[rootsInput].(*sdk.ListRootsResult)
		if !ok {
			return nil, sdk.InputRequestMap{rootsInput: &sdk.ListRootsParams{}}, nil
		}
		roots = r.Roots
	}
	params, warnings := w.s.initializeParams(ss, roots)
	for _, msg := range warnings {
		w.s.logf(ctx, ss, sdk.LoggingLevel("warning"), "%s", msg)
	}
	info, err := w.s.th.Initialize(ctx, params)
	if err != nil && ctx.Err() != nil {
		// The request was cancelled while toolhost initialized: the next
		// one tries again.
		return nil, nil, ctx.Err()
	}
	if err == nil {
		// A notification: it fails only when the session has ended.
		err = w.s.th.Initialized(context.WithoutCancel(ctx))
	}
	w.opened, w.info, w.err = true, info, err
	if err != nil {
		w.s.log.Warn("the toolhost session could not be opened", "err", err)
	} else {
		w.s.log.Info("workspace opened", "root", info.Workspace.Root, "readRoots", info.Workspace.ReadRoots)
	}
	return info, nil, err
}

// offersRoots reports whether the session's client said it has roots.
func offersRoots(ss *sdk.ServerSession) bool {
	p := ss.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.RootsV2 != nil
}

// initializeParams maps an MCP client's roots onto toolhost's initialize,
// which may narrow the command line's --root and --read-root, never widen
// them:
//
//   - the first file root is the workspace root, except when it contains
//     --root, whose inside is all the two have in common; toolhost refuses
//     a root outside --root with PathOutsideWorkspace;
//   - without --root the other file roots are read roots; with --root they
//     are left out (they could only widen it);
//   - without roots the root is --root, or else the current directory, as
//     for any MCP server a client starts in its project.
//
// It returns the roots it left out, a sentence each.
func (s *Server) initializeParams(ss *sdk.ServerSession, roots []*sdk.Root) (*protocol.InitializeParams, []string) {
	p := &protocol.InitializeParams{ClientInfo: &protocol.ClientInfo{Name: "mcp"}}
	if ip := ss.InitializeParams(); ip != nil && ip.ClientInfo != nil {
		p.ClientInfo = &protocol.ClientInfo{Name: "mcp: " + ip.ClientInfo.Name, Version: ip.ClientInfo.Version}
	}
	if canElicit(ss) || s.shared {
		// toolhost's asks become elicitations of this client (approvals.go);
		// without the capability its commands are refused as without
		// approvals, at once. A shared server's session serves every
		// connection, of which this is only the first: it asks, and each
		// ask is put to the client of the call that caused it, or refused
		// at once when that client cannot elicit (approvalRequest).
		p.Capabilities = &protocol.ClientCapabilities{Approvals: &protocol.ApprovalsClientCapabilities{}}
	}
	var warnings []string
	var paths []string
	for _, r := range roots {
		u, err := url.Parse(r.URI)
		if err != nil || u.Scheme != "file" || !filepath.IsAbs(u.Path) {
			warnings = append(warnings, "root "+r.URI+" is not a file URI with an absolute path: left out")
			continue
		}
		paths = append(paths, filepath.Clean(u.Path))
	}
	root := s.cfg.Root
	switch {
	case len(paths) > 0 && (root == "" || !within(root, paths[0])):
		root = paths[0]
	case len(paths) > 0:
		// The client's root holds --root: --root is the intersection.
	case root == "":
		if wd, err := os.Getwd(); err == nil {
			root = wd
		}
	}
	if root != "" {
		u := (&url.URL{Scheme: "file", Path: root}).String()
		p.RootURI = &u
	}
	if len(paths) > 1 {
		if s.cfg.Root == "" {
			p.InitializationOptions = &protocol.InitializationOptions{ReadRoots: paths[1:]}
		} else {
			for _, extra := range paths[1:] {
				warnings = append(warnings, "root "+extra+" left out: with --root, only the first root is used (to narrow it)")
			}
		}
	}
	return p, warnings
}

// within reports whether path lies inside dir (or is dir), lexically.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
