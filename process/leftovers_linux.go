package process

import (
	"fmt"
	"strings"

	cgroupfs "github.com/toolhost/toolhost/internal/cgroup"
)

// KillLeftovers ends, with SIGKILL, whatever the processes of a dead
// server's session left: its cgroup whole (which reaches a descendant that
// cleared its environment), then every process whose marker names the
// session. It returns how many processes it found by marker. The caller
// must be sure that server is dead: its journal's lock was free.
func KillLeftovers(l Leftovers) (int, error) {
	if l.Marker == "" {
		return 0, fmt.Errorf("no marker to find the session's processes by")
	}
	var err error
	if l.Cgroup != "" {
		err = cgroupfs.RemoveTree(l.Cgroup)
	}
	prefix := l.Marker + "/"
	found := 0
	t := killTarget{
		groups: func() []int { return nil },
		find: func() []int {
			pids := scanMarkers(func(s string) bool { return strings.HasPrefix(s, prefix) })
			found = max(found, len(pids))
			return pids
		},
	}
	if !killLadder(t, 0, false, nil) {
		err = fmt.Errorf("processes of session %s survived SIGKILL", l.Marker)
	}
	return found, err
}
