package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// machine describes where the figures were measured.
type machine struct {
	CPU, Cores, Memory, Go, Kernel string
	// Disk is the file system the work directory (roots, artifacts and
	// the baseline's file) lives on: file creation and writes depend on it.
	Disk string
	// Load is the load average when the run began and when it ended: the
	// figures are only as quiet as the machine was.
	Load string
}

// describeMachine reads the machine's description from /proc, where there
// is one, and from the go command.
func describeMachine() machine {
	m := machine{CPU: "unknown", Cores: strconv.Itoa(runtime.NumCPU()), Memory: "unknown", Kernel: runtime.GOOS}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if out, err := exec.Command("nproc").Output(); err == nil {
		m.Cores = strings.TrimSpace(string(out))
	}
	if kib, ok := procField("/proc/meminfo", "MemTotal"); ok {
		m.Memory = fmt.Sprintf("%.1f GiB", float64(kib)/(1<<20))
	}
	if out, err := exec.Command("go", "version").Output(); err == nil {
		m.Go = strings.TrimSpace(string(out))
	} else {
		m.Go = runtime.Version()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = runtime.GOOS + " " + strings.TrimSpace(string(b))
	}
	return m
}

// fileSystemOf returns the device and type of the mount dir lives on, from
// /proc/mounts (the longest mount point that holds it).
func fileSystemOf(dir string) string {
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return "unknown"
	}
	best, out := -1, "unknown"
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		mp := f[1]
		if (dir == mp || strings.HasPrefix(dir, strings.TrimSuffix(mp, "/")+"/")) && len(mp) > best {
			best, out = len(mp), fmt.Sprintf("%s (%s on %s)", mp, f[2], f[0])
		}
	}
	return out
}

// loadAverage returns the 1-minute load average from /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

// procField returns the number of a "Name:   123 kB" line of a /proc file.
func procField(path, name string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != name {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			return 0, false
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		return n, err == nil
	}
	return 0, false
}

// memoryOf returns a memory figure of a process ("VmRSS", "VmHWM") in
// bytes.
func memoryOf(pid int, field string) (int64, error) {
	kib, ok := procField("/proc/"+strconv.Itoa(pid)+"/status", field)
	if !ok {
		return 0, fmt.Errorf("no %s for pid %d in /proc", field, pid)
	}
	return kib << 10, nil
}

// alive returns how many of pids still have an entry in /proc (a zombie
// counts: it is not gone until it is reaped).
func alive(pids map[int]bool) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err == nil && pids[pid] {
			n++
		}
	}
	return n, nil
}

// childrenOf returns the pids whose parent is ppid, from /proc/*/stat.
func childrenOf(ppid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command sits in parentheses and may hold anything; the
		// fields after its last ')' are the state and the parent's pid.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(ppid) {
			out = append(out, pid)
		}
	}
	return out, nil
}

// commOf returns a process's command name, or "" if it is gone.
func commOf(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
