//go:build linux

package cgroup

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func TestOwnerPID(t *testing.T) {
	t.Parallel()
	type result struct {
		PID int
		OK  bool
	}
	for _, tc := range []struct {
		name, prefix string
		want         result
	}{
		{"toolhost-123-abcdef", "toolhost-", result{123, true}},
		{"toolhost-123-", "toolhost-", result{123, true}},
		{"toolhost-sandbox-77-4", "toolhost-sandbox-", result{77, true}},
		{"toolhost-sandbox-77-4", "toolhost-", result{}}, // another prefix's
		{"toolhost-123", "toolhost-", result{}},          // no dash after the pid
		{"toolhost--5-x", "toolhost-", result{}},
		{"toolhost-0-x", "toolhost-", result{}},
		{"toolhost-007-x", "toolhost-", result{}}, // not how a pid is written
		{"toolhost-+7-x", "toolhost-", result{}},
		{"other-123-x", "toolhost-", result{}},
	} {
		pid, ok := OwnerPID(tc.name, tc.prefix)
		if diff := cmp.Diff(tc.want, result{pid, ok}); diff != "" {
			t.Errorf("OwnerPID(%q, %q) mismatch (-want +got):\n%s", tc.name, tc.prefix, diff)
		}
	}
}

// TestFiles checks what the package reads from and writes to a cgroup's
// files, on a directory standing in for cgroupfs.
func TestFiles(t *testing.T) {
	t.Parallel()
	type got struct {
		Procs        []int
		ProcsErr     bool
		Populated    bool
		PopulatedErr bool
		Events       bool
		EventsErr    bool
		Empty        bool
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  got
	}{
		{"v2 populated", map[string]string{"cgroup.procs": "12\n345\n", "cgroup.events": "populated 1\nfrozen 0\n"},
			got{Procs: []int{12, 345}, Populated: true, Events: true}},
		{"v2 empty children populated", map[string]string{"cgroup.procs": "", "cgroup.events": "populated 1\nfrozen 0\n"},
			got{Populated: true, Events: true}},
		{"v2 empty", map[string]string{"cgroup.procs": "", "cgroup.events": "populated 0\nfrozen 0\n"},
			got{Empty: true}},
		{"v1 with processes", map[string]string{"cgroup.procs": "12\n"},
			got{Procs: []int{12}, PopulatedErr: true, EventsErr: true}},
		{"v1 with the calling process only", map[string]string{"cgroup.procs": strconv.Itoa(os.Getpid()) + "\n"},
			got{Procs: []int{os.Getpid()}, PopulatedErr: true, EventsErr: true, Empty: true}},
		{"gone", nil, got{ProcsErr: true, PopulatedErr: true, EventsErr: true, Empty: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var g got
			var err error
			g.Procs, err = Procs(dir)
			g.ProcsErr = err != nil
			g.Populated, err = Populated(dir)
			g.PopulatedErr = err != nil
			if ev, err := OpenEvents(dir); err != nil {
				g.EventsErr = true
			} else {
				g.Events, err = ev.Populated()
				if err != nil {
					t.Errorf("Events.Populated: %v", err)
				}
				_ = ev.Close()
			}
			g.Empty = Empty(dir)
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			// SignalKill writes only a cgroup.kill that is there.
			if err := SignalKill(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("SignalKill without cgroup.kill: %v, want ErrNotExist", err)
			}
			if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("SignalKill created cgroup.kill: %v", err)
			}
		})
	}
}

// hierarchy is a writable cgroup hierarchy of this machine, with the test
// process's own cgroup in it.
type hierarchy struct {
	name string
	// own is the test process's cgroup directory in the hierarchy.
	own string
}

// writable returns the test's v2 hierarchy ("v2") or v1 pids hierarchy
// ("v1 pids"), or skips the test saying why there is none.
func writable(t *testing.T, name string) hierarchy {
	t.Helper()
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skipf("no %s cgroup hierarchy: %v", name, err)
	}
	var mounts []string
	var magic int64
	var path string
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case name == "v2" && parts[0] == "0" && parts[1] == "":
			mounts, magic, path = []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}, unix.CGROUP2_SUPER_MAGIC, parts[2]
		case name == "v1 pids" && slices.Contains(strings.Split(parts[1], ","), "pids"):
			mounts, magic, path = []string{"/sys/fs/cgroup/pids"}, unix.CGROUP_SUPER_MAGIC, parts[2]
		}
	}
	if path == "" {
		t.Skipf("no %s cgroup hierarchy: /proc/self/cgroup has no entry for it", name)
	}
	for _, mnt := range mounts {
		var st unix.Statfs_t
		if unix.Statfs(mnt, &st) != nil || int64(st.Type) != magic {
			continue
		}
		own := filepath.Join(mnt, path)
		probe := filepath.Join(own, "toolhost-cgroup-probe-"+nonce(t))
		if err := os.Mkdir(probe, 0o755); err != nil {
			t.Skipf("no writable %s cgroup hierarchy: %v", name, err)
		}
		if err := os.Remove(probe); err != nil {
			t.Fatal(err)
		}
		return hierarchy{name: name, own: own}
	}
	t.Skipf("no %s cgroup hierarchy mounted at %s", name, strings.Join(mounts, " or "))
	return hierarchy{}
}

func nonce(t *testing.T) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// mkdir makes the cgroup dir, removed (with its processes killed) at the
// test's end if it is still there.
func mkdir(t *testing.T, dir string) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := os.Stat(dir); err == nil {
			_ = Kill(dir)
			_ = Remove(dir)
		}
	})
	return dir
}

// startIn starts sh -c script in the cgroup dir (forked into it on v2,
// moved there before it execs anything else on v1) and returns it; the
// test's end kills it.
func startIn(t *testing.T, h hierarchy, dir, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	if h.name == "v2" {
		f, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(f.Fd())}
	} else {
		// The shell waits for its stdin before it forks anything.
		cmd = exec.Command("sh", "-c", "read go; "+script)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if h.name != "v2" {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := stdin.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(script, "echo ready") {
		// The script says when it has forked all it forks: a kill before
		// that could find a fork refused (v1's pids.max drops to 0 while
		// the processes are killed) and the shell exiting of it.
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || line != "ready\n" {
			t.Fatalf("the command said %q (%v), want ready", line, err)
		}
	}
	return cmd
}

// killedBySIGKILL reports how cmd's Wait ended, "" if by SIGKILL.
func killedBySIGKILL(cmd *exec.Cmd) string {
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		return ""
	}
	return fmt.Sprintf("%v", err)
}

// deadPid returns the pid of a process that has exited and been waited
// for.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

var hierarchies = []string{"v2", "v1 pids"}

// TestKill checks that Kill ends every process of a cgroup, forks
// included, and that Remove refuses a populated cgroup and removes an
// emptied one.
func TestKill(t *testing.T) {
	t.Parallel()
	for _, name := range hierarchies {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := writable(t, name)
			dir := mkdir(t, filepath.Join(h.own, "toolhost-cgroup-test-"+nonce(t)))
			cmd := startIn(t, h, dir, "sleep 60 & echo ready; exec sleep 60")
			if Empty(dir) {
				t.Errorf("Empty with a command running in it")
			}
			pids, err := Procs(dir)
			if err != nil || !slices.Contains(pids, cmd.Process.Pid) {
				t.Errorf("Procs: %v, %v; want them to hold %d", pids, err, cmd.Process.Pid)
			}
			if err := Remove(dir); !errors.Is(err, unix.EBUSY) {
				t.Errorf("Remove of a populated cgroup: %v, want EBUSY", err)
			}
			if err := Kill(dir); err != nil {
				t.Fatalf("Kill: %v", err)
			}
			if how := killedBySIGKILL(cmd); how != "" {
				t.Errorf("the command ended with %s, want SIGKILL", how)
			}
			if !Empty(dir) {
				left, _ := Procs(dir)
				t.Errorf("not empty after Kill: %v", left)
			}
			if err := Remove(dir); err != nil {
				t.Errorf("Remove: %v", err)
			}
		})
	}
}

// TestSignalKillSubtree checks that on v2 one cgroup.kill ends a cgroup's
// children too, and that WaitEmpty then sees the whole subtree empty.
func TestSignalKillSubtree(t *testing.T) {
	t.Parallel()
	h := writable(t, "v2")
	dir := mkdir(t, filepath.Join(h.own, "toolhost-cgroup-test-"+nonce(t)))
	child := mkdir(t, filepath.Join(dir, "g1"))
	cmd := startIn(t, h, child, "sleep 60 & exec sleep 60")
	if pids, _ := Procs(dir); len(pids) != 0 {
		t.Errorf("Procs of the parent: %v, want none (they are its child's)", pids)
	}
	if Empty(dir) {
		t.Errorf("the parent is Empty while its child holds a command")
	}
	if err := SignalKill(dir); err != nil {
		t.Fatal(err)
	}
	if how := killedBySIGKILL(cmd); how != "" {
		t.Errorf("the command ended with %s, want SIGKILL", how)
	}
	if err := WaitEmpty(dir); err != nil {
		t.Errorf("WaitEmpty: %v", err)
	}
}

// TestSweepStale checks that SweepStale kills and removes, subtree and
// all, the directories of a dead owner, and leaves alone those of a live
// owner, those of another prefix and those whose name holds no pid.
func TestSweepStale(t *testing.T) {
	t.Parallel()
	for _, name := range hierarchies {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := writable(t, name)
			parent := mkdir(t, filepath.Join(h.own, "toolhost-cgroup-test-"+nonce(t)))
			dead := deadPid(t)
			stale := mkdir(t, filepath.Join(parent, fmt.Sprintf("x-%d-a", dead)))
			inner := mkdir(t, filepath.Join(stale, "g1"))
			if h.name != "v2" {
				// v1 forks stop while the processes are killed.
				if err := os.WriteFile(filepath.Join(inner, "pids.max"), []byte("100"), 0); err != nil {
					t.Fatal(err)
				}
			}
			cmd := startIn(t, h, inner, "sleep 60 & echo ready; exec sleep 60")
			kept := []string{
				mkdir(t, filepath.Join(parent, fmt.Sprintf("x-%d-b", os.Getpid()))),
				mkdir(t, filepath.Join(parent, fmt.Sprintf("y-%d-c", dead))),
				mkdir(t, filepath.Join(parent, "x-notapid-d")),
			}
			removed, err := SweepStale(parent, "x-")
			if err != nil {
				t.Errorf("SweepStale: %v", err)
			}
			if diff := cmp.Diff([]string{stale}, removed); diff != "" {
				t.Errorf("removed mismatch (-want +got):\n%s", diff)
			}
			if how := killedBySIGKILL(cmd); how != "" {
				t.Errorf("the stale command ended with %s, want SIGKILL", how)
			}
			if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the stale directory is still there: %v", err)
			}
			for _, d := range kept {
				if _, err := os.Stat(d); err != nil {
					t.Errorf("%s: %v, want it kept", filepath.Base(d), err)
				}
			}
		})
	}
}
