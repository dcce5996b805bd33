//go:build linux

package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// OwnerPID returns the pid in a directory name of the form
// <prefix><pid>-<anything>, the server that made it, and whether name has
// that form.
func OwnerPID(name, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	pidStr, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(pidStr)
	if err != nil || pid <= 0 || strconv.Itoa(pid) != pidStr {
		return 0, false
	}
	return pid, true
}

// ownerGone reports whether no process has pid. A pid that was reused by
// another process counts as alive: the directory is left alone then.
func ownerGone(pid int) bool {
	return errors.Is(unix.Kill(pid, 0), unix.ESRCH)
}

// SweepStale ends what servers that died without cleaning up left in
// parent: each directory named <prefix><pid>-<anything> (see OwnerPID)
// whose pid is gone is killed whole (see Kill; on v1 each cgroup of its
// subtree, a pids.max there set to 0 first so that nothing forks
// meanwhile) and removed with its subtree. A directory whose pid is alive,
// or reused, is left alone. It returns the directories it removed, and
// what kept it from removing others.
func SweepStale(parent, prefix string) ([]string, error) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	var (
		removed []string
		errs    []error
	)
	for _, e := range ents {
		pid, ok := OwnerPID(e.Name(), prefix)
		if !ok || !e.IsDir() || !ownerGone(pid) {
			continue
		}
		d := filepath.Join(parent, e.Name())
		if err := removeTree(d); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, d)
	}
	return removed, errors.Join(errs...)
}

// removeTree kills every process in the cgroup dir and beneath it, then
// removes its subtree, children first, and dir.
func removeTree(dir string) error {
	tree := subtree(dir, nil) // dir last, each child before its parent
	if SignalKill(dir) == nil {
		if err := WaitEmpty(dir); err != nil {
			return err
		}
	} else {
		for _, d := range tree {
			if _, err := os.Stat(filepath.Join(d, "pids.max")); err == nil {
				_ = os.WriteFile(filepath.Join(d, "pids.max"), []byte("0"), 0)
			}
		}
		for _, d := range tree {
			if err := Kill(d); err != nil {
				return err
			}
		}
	}
	for _, d := range tree {
		if err := Remove(d); err != nil {
			return err
		}
	}
	return nil
}

// subtree appends the directories beneath dir, then dir, to out: each
// directory after its children.
func subtree(dir string, out []string) []string {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() {
			out = subtree(filepath.Join(dir, e.Name()), out)
		}
	}
	return append(out, dir)
}

// RemoveTree kills every process in the cgroup dir and beneath it, then
// removes its subtree: what a dead server's session left, which a later
// server names from its journal. A dir already gone is no error.
func RemoveTree(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return removeTree(dir)
}
