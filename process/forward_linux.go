//go:build linux

package process

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/toolhost/toolhost/sandbox"
)

// enterNetNS starts a thread in the network namespace of pid, which must
// still be want ("net:[4026532297]"): a pid reused since the scan is not
// followed into another namespace.
func enterNetNS(pid int, want string) (*sandbox.NetNS, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		return nil, fmt.Errorf("port forward: %w", err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, fmt.Errorf("port forward: %w", err)
	}
	if got := "net:[" + strconv.FormatUint(st.Ino, 10) + "]"; got != want {
		return nil, fmt.Errorf("port forward: process %d is in %s now, not %s", pid, got, want)
	}
	return sandbox.EnterNetNS(f)
}
