package fsutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Durability says which fsyncs a commit makes.
type Durability int

const (
	// RenameOnly renames without an fsync: after a crash the name may hold
	// the old content, or (on some filesystems) none, but never a part.
	RenameOnly Durability = iota
	// SyncFile fsyncs the file before the rename, so the name never holds
	// less than all of the data.
	SyncFile
	// SyncFileDir also fsyncs the directory after the rename, so the new
	// name survives a crash once the commit returns.
	SyncFileDir
)

// Temp is a file being written beside the name it will replace. Its
// content reaches that name only through Commit, whole; Discard (safe to
// defer, and after Commit) removes it otherwise.
type Temp struct {
	*os.File
	path string // the name Commit renames it to
	perm fs.FileMode
	done bool // committed or discarded
}

// CreateTemp creates a temporary file in path's directory, named after
// path's base (".BASE.tmp-*") so that a crash leaves it recognisable. The
// file gets perm at commit.
func CreateTemp(path string, perm fs.FileMode) (*Temp, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return nil, err
	}
	return &Temp{File: f, path: path, perm: perm}, nil
}

// Commit closes the file and renames it over its name, with the fsyncs d
// asks for. On an error the temporary file is removed and the name keeps
// what it had.
func (t *Temp) Commit(d Durability) (err error) {
	if t.done {
		return os.ErrClosed
	}
	defer func() {
		if err != nil {
			t.Discard()
		}
	}()
	if d >= SyncFile {
		if err := t.Sync(); err != nil {
			return err
		}
	}
	if t.perm != 0o600 { // os.CreateTemp made it 0600
		if err := t.Chmod(t.perm); err != nil {
			return err
		}
	}
	if err := t.Close(); err != nil {
		return err
	}
	if err := os.Rename(t.Name(), t.path); err != nil {
		return err
	}
	t.done = true
	if d >= SyncFileDir {
		return SyncDir(filepath.Dir(t.path))
	}
	return nil
}

// Discard closes and removes the temporary file, unless Commit has
// renamed it.
func (t *Temp) Discard() {
	if t.done {
		return
	}
	t.done = true
	t.Close()
	os.Remove(t.Name())
}

// WriteFile writes data to path whole, through a temporary file beside it
// and a rename, with the fsyncs d asks for, and gives it perm.
func WriteFile(path string, data []byte, perm fs.FileMode, d Durability) error {
	t, err := CreateTemp(path, perm)
	if err != nil {
		return err
	}
	if _, err := t.Write(data); err != nil {
		t.Discard()
		return err
	}
	return t.Commit(d)
}

// SyncDir fsyncs the directory dir, so that a rename in it is durable. A
// filesystem that cannot sync a directory (EINVAL) is not an error: it
// costs durability only, as it would for any program there.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}
