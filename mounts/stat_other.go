//go:build !linux

package mounts

import (
	"io/fs"
	"os"
)

// stampOf is fi's stamp: size and mtime (this platform's stat is not
// read further).
func stampOf(fi fs.FileInfo) stamp {
	return stamp{Size: fi.Size(), Mtime: fi.ModTime().UnixNano()}
}

// bootID returns "": this platform's boot has no id that is read here.
func bootID() string { return "" }

// syncFS flushes what it can of the files beneath dir: here, dir's own
// entries only (Linux flushes the whole filesystem with syncfs(2)).
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	f.Sync()
	return nil
}
