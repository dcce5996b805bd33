package process

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// helperBin is this test binary, at a path a confined command sees.
var helperBin = os.Args[0]

// TestMain moves the tests' temporary directories (TMPDIR) and the helper
// binary (helperBin) out of the host's /tmp, where go test builds the
// binary: a confined command has a /tmp of its own, which hides the
// host's, and the tests expect to find their files at their paths.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(m.Run()) // a helper run as a command: nothing to move
	}
	done, err := outOfTmp()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	done()
	os.Exit(code)
}

// outOfTmp links (or copies) the test binary into a new directory in
// /var/tmp, points helperBin and TMPDIR there, and returns what removes it.
func outOfTmp() (func(), error) {
	bin, err := filepath.Abs(os.Args[0])
	if err != nil {
		return nil, err
	}
	under := func(p string) bool { return strings.HasPrefix(filepath.Clean(p), "/tmp/") }
	if !under(os.TempDir()) && !under(bin) {
		return func() {}, nil
	}
	dir, err := os.MkdirTemp("/var/tmp", "proc")
	if err != nil {
		return nil, fmt.Errorf("a temporary directory outside /tmp: %w", err)
	}
	helperBin = filepath.Join(dir, filepath.Base(bin))
	if err := os.Link(bin, helperBin); err != nil {
		if err := copyExecutable(bin, helperBin); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	os.Setenv("TMPDIR", dir)
	return func() { os.RemoveAll(dir) }, nil
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
