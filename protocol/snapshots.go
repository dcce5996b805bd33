package protocol

import "time"

// SnapshotParams are the params of snapshot.
type SnapshotParams struct {
	// Label names the snapshot for people.
	Label string `json:"label,omitempty"`
	// Destination runs it on a destination's root.
	Destination string `json:"destination,omitempty"`
}

// SnapshotInfo describes a snapshot: the result of snapshot, and the
// members of snapshots.
type SnapshotInfo struct {
	// SnapshotID names the snapshot (with a destination's prefix "NAME/"
	// when it is a destination's).
	SnapshotID string `json:"snapshotId"`
	// Label is the label it was taken with, or "".
	Label string `json:"label"`
	// CreatedAt is when it was taken.
	CreatedAt time.Time `json:"createdAt"`
	// Files counts its regular files.
	Files int `json:"files"`
	// Bytes is the size of its regular files.
	Bytes int64 `json:"bytes"`
	// NewBytes is what the store grew by to hold it: the contents no
	// snapshot held before.
	NewBytes int64 `json:"newBytes"`
	// Ms is how long it took.
	Ms int64 `json:"ms"`
}

// SnapshotList is the result of snapshots.
type SnapshotList []SnapshotInfo

// SnapshotsParams are the params of snapshots.
type SnapshotsParams struct {
	// Destination lists a destination's snapshots.
	Destination string `json:"destination,omitempty"`
}

// RestoreParams are the params of restore.
type RestoreParams struct {
	// SnapshotID names the snapshot to restore.
	SnapshotID string `json:"snapshotId"`
	// Paths, relative to the root (or absolute inside it), restore only
	// these; a directory names everything under it. Default: the whole
	// root.
	Paths []string `json:"paths,omitempty"`
	// Force restores while the session's commands run; without it such a
	// restore is SnapshotBusy.
	Force bool `json:"force,omitempty"`
	// Destination restores on a destination's root.
	Destination string `json:"destination,omitempty"`
}

// RestoreResult is the result of restore.
type RestoreResult struct {
	// Written counts the files, directories and symlinks written (made,
	// rewritten or given their mode back).
	Written int `json:"written"`
	// Removed counts the entries removed: made since the snapshot.
	Removed int `json:"removed"`
	// Ms is how long it took.
	Ms int64 `json:"ms"`
}

// DiffParams are the params of diff.
type DiffParams struct {
	// From is the snapshot compared.
	From string `json:"from"`
	// To is the snapshot compared with; absent: the root as it is now.
	To string `json:"to,omitempty"`
	// Path limits the changes to one path (a directory: everything under
	// it); when it names one text file, the result has its patch.
	Path string `json:"path,omitempty"`
	// Destination diffs a destination's snapshots.
	Destination string `json:"destination,omitempty"`
}

// ChangeKind is how a path changed.
type ChangeKind string

// The kinds of change.
const (
	ChangeAdded    ChangeKind = "added"
	ChangeModified ChangeKind = "modified"
	ChangeDeleted  ChangeKind = "deleted"
	ChangeMode     ChangeKind = "mode" // only the permission bits
	ChangeType     ChangeKind = "type" // file, directory or symlink became another
)

// Change is one changed path.
type Change struct {
	// Path is relative to the root, with "/" separators.
	Path string `json:"path"`
	// Kind says how it changed.
	Kind ChangeKind `json:"kind"`
	// Size is the size after the change (before, for deleted).
	Size int64 `json:"size"`
}

// DiffResult is the result of diff.
type DiffResult struct {
	// Changes are sorted by path, at most 1,000.
	Changes []Change `json:"changes"`
	// Truncated says more paths changed than Changes holds.
	Truncated bool `json:"truncated"`
	// Patch is a unified diff of Path when it names one text file that
	// changed; absent otherwise.
	Patch string `json:"patch,omitempty"`
}

// DropSnapshotParams are the params of dropSnapshot.
type DropSnapshotParams struct {
	SnapshotID  string `json:"snapshotId"`
	Destination string `json:"destination,omitempty"`
}

// DropSnapshotResult is the result of dropSnapshot: an empty object.
type DropSnapshotResult struct{}

// ExportSnapshotParams are the params of exportSnapshot.
type ExportSnapshotParams struct {
	SnapshotID  string `json:"snapshotId"`
	Destination string `json:"destination,omitempty"`
}

// ExportSnapshotResult is the result of exportSnapshot.
type ExportSnapshotResult struct {
	// Path is the tar of the snapshot, in the artifacts directory.
	Path string `json:"path"`
	// Bytes is its size.
	Bytes int64 `json:"bytes"`
}

// DirSize is a directory and the bytes beneath it, in SnapshotTooLarge's
// data.
type DirSize struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}
