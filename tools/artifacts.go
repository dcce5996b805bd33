package tools

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/toolhost/toolhost/capture"
	"github.com/toolhost/toolhost/protocol"
)

// artifactsDir is the directory that keeps the session's command output.
// It is created here and removed here, nowhere else: the process manager
// removes the files it wrote in it, and remove takes the directory itself
// when the session made it.
type artifactsDir struct {
	path string
	// temp says the session made path as a private temporary directory,
	// which it removes at the end unless the artifacts are kept.
	temp bool
}

// openArtifactsDir returns the artifacts directory: --artifacts-dir, else
// the client's, else a new private temporary one, which records this
// server as its owner (and keep, for --keep-artifacts), so that the next
// server removes it if this one is killed (capture.SweepTempDirs). A named
// directory is created (0700) if it does not exist, and is never swept.
func openArtifactsDir(flag, client string, keep bool) (*artifactsDir, error) {
	dir := flag
	if dir == "" {
		dir = client
	}
	if dir == "" {
		tmp, err := capture.MkdirTemp("", keep)
		if err != nil {
			return nil, fmt.Errorf("cannot create the artifacts directory: %w", err)
		}
		return &artifactsDir{path: tmp, temp: true}, nil
	}
	if !filepath.IsAbs(dir) {
		return nil, protocol.InvalidParams("initializationOptions.artifactsDir", "must be an absolute path, not %q", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, protocol.NewError(protocol.CodeNotFound, &protocol.ErrorData{Path: dir, Reason: err.Error()}, "cannot create the artifacts directory %q", dir)
	}
	// A named directory that a dead server made (reused by its name) must
	// not be swept while this session uses it. Best effort: a record that
	// cannot be rewritten leaves the directory as it was.
	_ = capture.KeepDir("", dir)
	return &artifactsDir{path: dir}, nil
}

// remove removes the directory if the session made it and keep is false.
// It is safe on nil and more than once.
func (a *artifactsDir) remove(keep bool) {
	if a == nil || !a.temp || keep {
		return
	}
	os.RemoveAll(a.path)
	a.temp = false
}
