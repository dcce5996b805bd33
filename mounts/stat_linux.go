package mounts

import (
	"io/fs"
	"os"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// stampOf is fi's stamp: size, mtime, ctime and inode.
func stampOf(fi fs.FileInfo) stamp {
	s := stamp{Size: fi.Size(), Mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.Ctime = st.Ctim.Nano()
		s.Ino = st.Ino
	}
	return s
}

// bootID returns the id of the running boot, or "" when it cannot be
// read.
var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
})

// syncFS flushes the filesystem that holds dir (syncfs(2)), so that the
// files written beneath it are whole on disk before a record names them.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}
