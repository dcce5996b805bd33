package mounts

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	"github.com/toolhost/toolhost/internal/fsutil"
)

// recordFormat is the record file's format; a record of another is
// not read (the mount starts clean).
const recordFormat = 1

// recordName is the record's file in the mount's directory.
const recordName = "record.json"

// record is what a mount knows it fetched: the read-only cache's objects
// and the writable working directory's files, with the versions they had.
// It is the only file under dir read back across processes, and it is
// checked when read.
type record struct {
	Format int    `json:"format"`
	URI    string `json:"uri"`
	Kind   string `json:"kind"`
	// Cache holds the read-only cache's object files, by id (objectID):
	// each is whole in objects/ with Size bytes.
	Cache map[string]cacheEntry `json:"cache,omitempty"`
	// CacheBoot, when set, is the boot (bootID) in which Cache's files
	// were written without a sync: in another, they are not trusted.
	CacheBoot string `json:"cacheBoot,omitempty"`
	// Files holds the writable working directory's files, by key: what
	// each was when last fetched or written back.
	Files map[string]*fileEntry `json:"files,omitempty"`
	// Dirs are the directory markers of a writable mount's last
	// listing: directories the bucket holds, empty or not.
	Dirs []string `json:"dirs,omitempty"`
	// LastSync is the end of the last Prepare or WriteBack that
	// succeeded.
	LastSync time.Time `json:"lastSync,omitzero"`
}

// cacheEntry is one object file of the read-only cache.
type cacheEntry struct {
	Key     string `json:"key"`
	Version string `json:"version"`
	Size    int64  `json:"size"`
}

// fileEntry is one file of a writable mount as the bucket and the
// working directory had it at its last fetch or write-back: the object's
// Version, and the local file's stamp and SHA-256 then.
type fileEntry struct {
	Version string `json:"version"`
	Stamp   stamp  `json:"stamp"`
	SHA256  string `json:"sha256"`
}

// stamp is what a file's stat says of its content: a file whose stamp is
// unchanged is taken as unchanged.
type stamp struct {
	Size  int64  `json:"size"`
	Mtime int64  `json:"mtime"` // nanoseconds since the epoch
	Ctime int64  `json:"ctime,omitempty"`
	Ino   uint64 `json:"ino,omitempty"`
}

func newRecord(spec Spec) *record {
	return &record{
		Format: recordFormat, URI: spec.URI, Kind: spec.Kind,
		Cache: map[string]cacheEntry{}, Files: map[string]*fileEntry{},
	}
}

// loadRecord reads dir's record of spec, whose listed prefix is prefix.
// It returns nil when there is none, or it is unreadable, of another
// format, another URI's or kind's, or corrupt: the caller starts clean.
func loadRecord(dir string, spec Spec, prefix string) *record {
	data, err := os.ReadFile(filepath.Join(dir, recordName))
	if err != nil {
		return nil
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil || r.Format != recordFormat {
		return nil
	}
	if r.URI == "" || r.Kind == "" {
		return nil
	}
	if r.Cache == nil {
		r.Cache = map[string]cacheEntry{}
	}
	if r.Files == nil {
		r.Files = map[string]*fileEntry{}
	}
	if r.URI != spec.URI || r.Kind != spec.Kind {
		return nil
	}
	for id, e := range r.Cache {
		if id != objectID(e.Key, e.Version) || e.Size < 0 {
			return nil
		}
	}
	for key, e := range r.Files {
		if e == nil || e.Version == "" || len(key) <= len(prefix) || key[:len(prefix)] != prefix || !validRel(key[len(prefix):]) {
			return nil
		}
		if b, err := hex.DecodeString(e.SHA256); err != nil || len(b) != 32 {
			return nil
		}
	}
	return &r
}

// save writes the record whole (a temporary file, renamed), fsynced with
// its directory unless the record is trusted in this boot only
// (CacheBoot) and names no working directory's files: an fsync on ext4
// writes out the files just fetched too, which cost a 1 GiB fetch a
// third of its time, for a cache that a crash of the machine makes
// untrusted anyway.
func (r *record) save(dir string) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	d := fsutil.SyncFileDir
	if r.CacheBoot != "" && len(r.Files) == 0 {
		d = fsutil.RenameOnly
	}
	return fsutil.WriteFile(filepath.Join(dir, recordName), data, 0o600, d)
}
