package workspace

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by this package wraps exactly one of
// them (through a *PathError), so callers map them to wire codes with errors.Is.
var (
	// ErrOutside means the path resolves outside the workspace root and the
	// read roots, or was refused outright (NUL byte, "~", /proc, too long).
	ErrOutside = errors.New("path outside workspace")
	// ErrNotFound means a file or directory (or a parent of it) is missing.
	ErrNotFound = errors.New("not found")
	// ErrReadOnly means a write into a read root or the artifacts directory.
	ErrReadOnly = errors.New("read-only root")
	// ErrTooLarge means the answer would exceed the byte limit.
	ErrTooLarge = errors.New("too large")
	// ErrConflict means expectedSha256 did not match the current content, or
	// the path changed while a write was in progress.
	ErrConflict = errors.New("conflict")
	// ErrNotRegular means a directory, FIFO, socket or device was found where
	// a regular file (or, for Dir, a directory) is needed.
	ErrNotRegular = errors.New("not a regular file")
	// ErrInvalid means bad parameters: empty path, bad base64, unknown
	// encoding, malformed sha256, negative line numbers, symlink loops.
	ErrInvalid = errors.New("invalid argument")
	// ErrPermission means the operating system denied access.
	ErrPermission = errors.New("permission denied")
	// ErrIO means any other operating-system failure (disk full, I/O error).
	ErrIO = errors.New("i/o error")
	// ErrPolicy means the path is inside the roots but the workspace's
	// Policy refuses it: a denyRead path read or written, a protect path
	// written. PathError.Policy and Entry say which entry.
	ErrPolicy = errors.New("refused by policy")
)

// PathError describes a refused or failed operation on a path. It carries
// everything the wire error's data needs.
type PathError struct {
	Op     string // "read", "write", "dir", "open"
	Path   string // the path as the caller gave it
	Reason string // a sentence for humans: why, and what to do
	// Size and Limit are set for ErrTooLarge: the file size and the limit.
	Size, Limit int64
	// Expected and Actual are set for ErrConflict: hex sha256 values, Actual
	// being AbsentSha256 when the file does not exist.
	Expected, Actual string
	// Field names the option at fault when it is not Path: "content",
	// "encoding" or "expectedSha256" (set for ErrInvalid only).
	Field string
	// Policy and Entry are set for ErrPolicy: PolicyDenyRead or
	// PolicyProtect, and the entry that matched, as configured.
	Policy, Entry string
	Err           error // one of the sentinel errors
}

// Error returns "op path: sentinel: reason".
func (e *PathError) Error() string {
	msg := fmt.Sprintf("%s %q: %v", e.Op, e.Path, e.Err)
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg
}

// Unwrap returns the sentinel error.
func (e *PathError) Unwrap() error { return e.Err }

// newErr builds a *PathError whose Reason is formatted from format and args.
func newErr(op, path string, sentinel error, format string, args ...any) *PathError {
	return &PathError{Op: op, Path: path, Err: sentinel, Reason: fmt.Sprintf(format, args...)}
}
