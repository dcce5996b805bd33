//go:build linux

package workspace

import (
	"os"
	"strconv"
	"strings"
)

// pathMax is Linux's PATH_MAX, which counts the terminating NUL: a path of
// pathMax bytes or more is refused.
const pathMax = 4096

// fdPath returns the absolute path the kernel records for f's descriptor
// (/proc/self/fd/N). It reports false when /proc is unavailable or the file
// has been deleted, and callers fall back to the resolved name.
func fdPath(f *os.File) (string, bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		return "", false
	}
	var fd uintptr
	if err := rc.Control(func(x uintptr) { fd = x }); err != nil {
		return "", false
	}
	p, err := os.Readlink("/proc/self/fd/" + strconv.FormatUint(uint64(fd), 10))
	if err != nil || !strings.HasPrefix(p, "/") || strings.HasSuffix(p, " (deleted)") {
		return "", false
	}
	return p, true
}
