//go:build linux

package capture

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// processStart returns when process pid started, in clock ticks after
// boot: field 22 of /proc/<pid>/stat.
func processStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStart(b)
}

// parseStart reads field 22 (starttime) of a /proc/<pid>/stat. The
// command's name (field 2) may hold spaces and parentheses, so fields are
// counted after the last ')': field 3 (state) is the first there.
func parseStart(b []byte) (uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	const at = 22 - 3
	if len(f) <= at {
		return 0, fmt.Errorf("malformed stat: %d fields after the name", len(f))
	}
	n, err := strconv.ParseUint(f[at], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("malformed stat: starttime: %w", err)
	}
	return n, nil
}
