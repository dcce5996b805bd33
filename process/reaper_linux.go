//go:build linux

package process

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// setChildSubreaper makes the server process a child subreaper, so orphaned
// descendants of its commands are re-parented to it instead of to init, where
// the tree walk below finds them. It is process-wide and never undone.
func setChildSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// childrenOf lists the children of pid, from /proc/<pid>/task/*/children
// (a child hangs under the thread that forked it, or under the thread the
// kernel picked when it re-parented the child).
//
// The threads are listed with one getdents of the task directory, not
// filepath.Glob, which would also list each thread's directory to find
// "children" in it: with a thread per running confined command, a server
// running a thousand read a thousand directories more for each call.
func childrenOf(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tids, _ := readdirnames(dir)
	var out []int
	for _, tid := range tids {
		b, err := os.ReadFile(dir + tid + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// subtree appends pid's descendants (not pid itself) to out, depth first.
// The depth bound keeps a pathological tree from running away.
func subtree(pid int, out []int) []int {
	var walk func(p, depth int)
	walk = func(p, depth int) {
		if depth > 64 {
			return
		}
		for _, c := range childrenOf(p) {
			out = append(out, c)
			walk(c, depth+1)
		}
	}
	walk(pid, 0)
	return out
}

// procInfo is what /proc/<pid>/stat says about a process.
type procInfo struct {
	state           byte
	ppid, pgid, sid int
}

// readStat parses /proc/<pid>/stat. The command name may hold spaces and
// parentheses, so fields are counted after the last ')'.
func readStat(pid int) (procInfo, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 4 || len(f[0]) != 1 {
		return procInfo{}, errors.New("malformed stat")
	}
	var pi procInfo
	pi.state = f[0][0]
	pi.ppid, _ = strconv.Atoi(f[1])
	pi.pgid, _ = strconv.Atoi(f[2])
	pi.sid, _ = strconv.Atoi(f[3])
	return pi, nil
}

// procGone reports whether pid no longer runs: it does not exist, or it is
// a zombie (dead, waiting for its parent to reap it).
func procGone(pid int) bool {
	pi, err := readStat(pid)
	if err != nil {
		return true
	}
	return pi.state == 'Z' || pi.state == 'X' || pi.state == 'x'
}

// procMarker returns the value of TOOLHOST_COMMAND in pid's initial
// environment, or "" if it has none or cannot be read (zombies have none).
func procMarker(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return ""
	}
	key := []byte(EnvCommand + "=")
	for _, kv := range bytes.Split(b, []byte{0}) {
		if bytes.HasPrefix(kv, key) {
			return string(kv[len(key):])
		}
	}
	return ""
}

// scanMarkers walks all of /proc and returns the pids whose marker
// satisfies match. It is the fallback when the server is not a subreaper,
// and Shutdown's last sweep.
func scanMarkers(match func(string) bool) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if m := procMarker(pid); m != "" && match(m) {
			out = append(out, pid)
		}
	}
	return out
}

// procSupported reports whether /proc can attribute and walk processes.
const procSupported = true

// peekZombie returns a child that can be waited for (a zombie) without
// reaping it, or false when there is none.
func peekZombie() (int, bool) {
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err != nil {
		return 0, false
	}
	// si_pid opens the union after si_signo, si_errno and si_code, which
	// the kernel pads to 16 bytes on 64-bit platforms and to 12 on 32-bit.
	off := uintptr(12)
	if unsafe.Sizeof(uintptr(0)) == 8 {
		off = 16
	}
	pid := *(*int32)(unsafe.Add(unsafe.Pointer(&info), off))
	return int(pid), pid > 0
}

// reapZombie collects pid if it is a zombie child of the server, without
// blocking. The caller has checked that os/exec does not own pid.
func reapZombie(pid int) {
	var ws unix.WaitStatus
	_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
}
