// Package testtmp moves a test binary's temporary directories out of the
// host's /tmp, for the tests of packages whose confined commands run the
// test binary or read its temporary files: a confined command has a /tmp
// of its own, which hides the host's. It is for tests only, and imports
// nothing of toolhost.
package testtmp

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// OutOfTmp links (or copies) the running test binary into a new directory
// in /var/tmp and points TMPDIR there, when either lies in /tmp. It
// returns the binary's path to run (os.Args[0] when nothing moved) and
// what removes the directory.
func OutOfTmp(prefix string) (bin string, done func(), err error) {
	bin, err = filepath.Abs(os.Args[0])
	if err != nil {
		return "", nil, err
	}
	under := func(p string) bool { return strings.HasPrefix(filepath.Clean(p)+"/", "/tmp/") }
	if !under(os.TempDir()) && !under(bin) {
		return os.Args[0], func() {}, nil
	}
	dir, err := os.MkdirTemp("/var/tmp", prefix)
	if err != nil {
		return "", nil, fmt.Errorf("a temporary directory outside /tmp: %w", err)
	}
	moved := filepath.Join(dir, filepath.Base(bin))
	if err := os.Link(bin, moved); err != nil {
		if err := copyExecutable(bin, moved); err != nil {
			os.RemoveAll(dir)
			return "", nil, err
		}
	}
	os.Setenv("TMPDIR", dir) // short: unix socket paths are made there
	return moved, func() { os.RemoveAll(dir) }, nil
}

// copyExecutable copies the executable src to dst.
func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
