package snapshot

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Errors returned by this package wrap one of them (with
// %w, or through *TooLargeError for ErrTooLarge), so that callers map them to
// wire codes with errors.Is.
var (
	// ErrNotFound means no snapshot has the ID (or the ID is malformed).
	ErrNotFound = errors.New("snapshot not found")
	// ErrTooLarge means a Take would push the store over Options.MaxBytes;
	// the error is a *TooLargeError naming the tree's largest directories.
	ErrTooLarge = errors.New("snapshot too large")
	// ErrDamaged means a blob, tree or manifest in the store does not match
	// its hash or cannot be parsed; the error names it.
	ErrDamaged = errors.New("snapshot store damaged")
	// ErrOtherRoot means a snapshot of another root was given to Restore or
	// Diff.
	ErrOtherRoot = errors.New("snapshot of another root")
	// ErrOutsideRoot means a path in RestoreOptions.Paths, DiffOptions.Path
	// or a Skip list is outside the root: absolute outside it, or with a
	// ".." component. The error names the path.
	ErrOutsideRoot = errors.New("path outside the root")
	// ErrInvalid means a bad argument: a root that is not an absolute
	// directory, a store inside the root it snapshots, a NUL in a path.
	ErrInvalid = errors.New("invalid snapshot argument")
	// ErrClosed means the Store was closed.
	ErrClosed = errors.New("snapshot store closed")
)

// DirSize is a directory of a tree, relative to its root ("." for the
// files directly in the root), and the bytes of the regular files beneath
// it, subdirectories included.
type DirSize struct {
	Path  string
	Bytes int64
}

// TooLargeError is the error of a Take refused by Options.MaxBytes. It
// matches ErrTooLarge with errors.Is.
type TooLargeError struct {
	Root string
	// Max is the cap, Used the store's size before the Take, Need the bytes
	// the Take would have added (at least: counting stops once over).
	Max, Used, Need int64
	// Largest names the largest directories of the tree, largest first:
	// those directly in the root and one level below.
	Largest []DirSize
}

func (e *TooLargeError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: %s would add at least %d bytes to a store of %d, over its cap of %d",
		ErrTooLarge, e.Root, e.Need, e.Used, e.Max)
	if len(e.Largest) > 0 {
		b.WriteString("; largest directories:")
		for i, d := range e.Largest {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, " %s (%d bytes)", d.Path, d.Bytes)
		}
	}
	return b.String()
}

// Is makes errors.Is(err, ErrTooLarge) true.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// damaged names a blob that failed its check, and the path it was read for.
func damaged(h hash32, path, why string) error {
	if path == "" {
		return fmt.Errorf("%w: blob %s: %s", ErrDamaged, hex.EncodeToString(h[:]), why)
	}
	return fmt.Errorf("%w: blob %s (for %q): %s", ErrDamaged, hex.EncodeToString(h[:]), path, why)
}
