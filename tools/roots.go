package tools

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/workspace"
)

// chooseRoot returns the root: --root, narrowed by the client's rootUri or
// rootPath when one is given; else the client's.
func (t *Tools) chooseRoot(p *protocol.InitializeParams) (string, error) {
	var client, field string
	switch {
	case p.RootURI != nil && *p.RootURI != "":
		path, err := URIPath(*p.RootURI)
		if err != nil {
			return "", protocol.InvalidParams("rootUri", "%v", err)
		}
		client, field = path, "rootUri"
	case p.RootPath != nil && *p.RootPath != "":
		client, field = *p.RootPath, "rootPath"
	}
	if t.cfg.Root == "" {
		if client == "" {
			return "", protocol.InvalidParams("rootUri", "no workspace root: give rootUri or rootPath, or start the server with --root")
		}
		if !filepath.IsAbs(client) {
			return "", protocol.InvalidParams(field, "must be an absolute path, not %q", client)
		}
		return client, nil
	}
	if client == "" {
		return t.cfg.Root, nil
	}
	if !filepath.IsAbs(client) {
		return "", protocol.InvalidParams(field, "must be an absolute path, not %q", client)
	}
	dir, err := narrow(workspace.Config{Root: t.cfg.Root}, field, client)
	if errors.Is(err, workspace.ErrOutside) {
		return "", protocol.NewError(protocol.CodePathOutsideWorkspace, &protocol.ErrorData{Field: field, Path: client, Reason: "the client may narrow --root, never widen it"},
			"%s %q is outside the server's --root %q", field, client, t.cfg.Root)
	}
	return dir, err
}

// chooseReadRoots returns the read roots: the command line's, narrowed by
// the client's when it gives some. With --root or --read-root set, every
// client read root must lie inside the root or a command-line read root.
func (t *Tools) chooseReadRoots(root string, client []string) ([]string, error) {
	if len(client) == 0 {
		return t.cfg.ReadRoots, nil
	}
	var paths []string
	for i, c := range client {
		field := fmt.Sprintf("initializationOptions.readRoots[%d]", i)
		path := c
		if strings.HasPrefix(c, "file:") {
			var err error
			if path, err = URIPath(c); err != nil {
				return nil, protocol.InvalidParams(field, "%v", err)
			}
		}
		if !filepath.IsAbs(path) {
			return nil, protocol.InvalidParams(field, "must be an absolute path or a file URI, not %q", c)
		}
		paths = append(paths, path)
	}
	if t.cfg.Root == "" && len(t.cfg.ReadRoots) == 0 {
		return paths, nil
	}
	bounds := workspace.Config{Root: root, ReadRoots: t.cfg.ReadRoots}
	for i, path := range paths {
		field := fmt.Sprintf("initializationOptions.readRoots[%d]", i)
		dir, err := narrow(bounds, field, path)
		if errors.Is(err, workspace.ErrOutside) {
			return nil, protocol.NewError(protocol.CodePathOutsideWorkspace,
				&protocol.ErrorData{Field: field, Path: path, Reason: "the client may narrow the command line's roots, never widen them"},
				"read root %q is outside the server's --root and --read-root", path)
		}
		if err != nil {
			return nil, err
		}
		paths[i] = dir
	}
	return paths, nil
}

// narrow resolves a directory the client names, field, through a
// workspace opened on bounds: the same os.Root handles and rules as every
// file request, so a symlink that leads out of bounds is refused, not
// followed. It returns the directory's real path; a path out of bounds is
// an error matching workspace.ErrOutside.
func narrow(bounds workspace.Config, field, path string) (string, error) {
	ws, err := workspace.Open(bounds)
	if err != nil {
		return "", initError(field, err)
	}
	defer ws.Close()
	dir, err := ws.Dir(path)
	if err != nil {
		if errors.Is(err, workspace.ErrOutside) {
			return "", err
		}
		return "", initError(field, err)
	}
	return dir, nil
}

// URIPath returns the path of a file URI.
func URIPath(uri string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", fmt.Errorf("not a URI: %v", err)
	}
	if u.Scheme != "file" {
		return "", fmt.Errorf("only file URIs are supported, not %q", u.Scheme)
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", fmt.Errorf("a file URI with host %q is not local", u.Host)
	}
	return u.Path, nil
}

// initError maps a workspace error about a root the client's field names
// to a wire error.
func initError(field string, err error) error {
	var pe *workspace.PathError
	path := ""
	if errors.As(err, &pe) {
		path = pe.Path
	}
	switch {
	case errors.Is(err, workspace.ErrNotFound):
		return protocol.NewError(protocol.CodeNotFound, &protocol.ErrorData{Path: path, Reason: "the root does not exist"}, "%v", err)
	case errors.Is(err, workspace.ErrNotRegular):
		return protocol.NewError(protocol.CodeInvalidParams, &protocol.ErrorData{Field: field, Path: path, Reason: "the root is not a directory"}, "%v", err)
	}
	return wsError(err)
}
