//go:build linux

package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Probe measures what this kernel and the server's privileges offer. Each
// namespace, filter and capability is tried for real on a throwaway thread
// (which exits with what it changed) or a throwaway child (a PID
// namespace's init is started and ended); cgroups are read
// from /proc/self/mountinfo and /proc/self/cgroup and tried with a mkdir.
// The tries need one thread, not one each: none changes what the next may
// do, and they are made in the order a confined command gets them (the
// capability drop, the network and mount namespaces, seccomp, then the
// fork of a child stopped at its exec); the cgroups are tried meanwhile on
// another goroutine. It takes a millisecond or two, most of it the kernel
// building a network stack for the network namespace; DefaultCapabilities
// caches it.
func Probe() Capabilities {
	c := Capabilities{Reasons: make(map[string]string)}

	abi, err := landlockABI()
	if err != nil {
		c.Reasons["landlock"] = err.Error()
	}
	c.LandlockABI = abi
	c.CPULimit = true // prlimit(2) exists since Linux 2.6.36

	var (
		cgroups                                         sync.WaitGroup
		cg                                              = Capabilities{Reasons: make(map[string]string)}
		capErr, netErr, mountErr, seccompErr, ptraceErr error
	)
	cgroups.Go(func() { probeCgroups(&cg) })
	root := os.Geteuid() == 0
	_ = onThrowawayThread(func() error {
		if root {
			capErr = unix.Prctl(unix.PR_CAPBSET_DROP, unix.CAP_SYS_BOOT, 0, 0, 0)
		}
		netErr = unix.Unshare(unix.CLONE_NEWNET)
		mountErr = probeMountNS()
		if seccompErr = unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); seccompErr == nil {
			seccompErr = installNetFilter()
		}
		ptraceErr = probeExecDevNull(&syscall.SysProcAttr{Ptrace: true})
		return nil
	})
	cgroups.Wait()

	if mountErr != nil {
		c.Reasons["mountns"] = "no mount namespace: " + mountErr.Error()
	} else {
		c.MountNS = true
	}
	if ptraceErr != nil {
		c.Reasons["ptrace"] = "the child cannot be stopped at its exec: " + ptraceErr.Error()
	} else {
		c.PtraceStop = true
	}
	if netErr == nil {
		c.NetNS = NetNSUnshare
	} else if !c.PtraceStop {
		// The child's id maps are written while it is stopped at its exec.
		c.Reasons["netns"] = fmt.Sprintf("no network namespace: unshare: %v; user namespace: %s", netErr, c.Reasons["ptrace"])
	} else if uerr := probeUserNS(); uerr == nil {
		c.NetNS = NetNSUserNS
	} else {
		c.Reasons["netns"] = fmt.Sprintf("no network namespace: unshare: %v; user namespace: %v", netErr, uerr)
	}
	if seccompErr != nil {
		c.Reasons["seccomp"] = "no seccomp: " + seccompErr.Error()
	} else {
		c.Seccomp = true
	}
	c.CapDrop = root && capErr == nil
	c.Pids, c.Memory = cg.Pids, cg.Memory
	maps.Copy(c.Reasons, cg.Reasons)

	var proc error // written on the throwaway thread before it answers
	pidns := onThrowawayThread(func() error {
		var pidns error
		pidns, proc = probePIDNS(c.MountNS)
		return pidns
	})
	if pidns != nil {
		c.Reasons["pidns"] = "no PID namespace: " + pidns.Error()
	} else {
		c.PIDNS = true
	}
	if proc != nil {
		c.Reasons["proc"] = "no /proc of a PID namespace: " + proc.Error()
	} else {
		c.PIDNSProc = true
	}
	if !c.MountNS {
		c.Reasons["masks"] = c.Reasons["mountns"]
	} else if err := onThrowawayThread(probeMasks); err != nil {
		c.Reasons["masks"] = "no masks: " + err.Error()
	} else {
		c.Masks = true
	}
	return c
}

// landlockABI asks the kernel for its Landlock ABI version.
func landlockABI() (int, error) {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	switch e {
	case 0:
		return int(v), nil
	case unix.ENOSYS:
		return 0, errors.New("no Landlock: the kernel is built without it")
	case unix.EOPNOTSUPP:
		return 0, errors.New("no Landlock: it is disabled at boot (not in lsm=)")
	default:
		return 0, fmt.Errorf("no Landlock: %w", e)
	}
}

// onThrowawayThread runs f on a goroutine locked to a thread other than
// the main one (goLocked), which exits with whatever f changed in it, and
// returns f's error.
func onThrowawayThread(f func() error) error {
	errc := make(chan error, 1)
	goLocked(func() { errc <- f() })
	return <-errc
}

// probeMountNS does on the calling (throwaway) thread what applyMountNS
// needs: a mount namespace of its own, mounts made slaves, a bind mount and
// mount_setattr.
func probeMountNS() error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make-rslave: %w", err)
	}
	d := os.TempDir()
	if err := unix.Mount(d, d, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	if err := unix.MountSetattr(unix.AT_FDCWD, d, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("mount_setattr: %w", err)
	}
	return nil
}

// probeUserNS clones a child into a new user and network namespace and has
// it exec /dev/null, which always fails with EACCES: that error means the
// clone worked; any other means it did not.
func probeUserNS() error {
	return probeExecDevNull(&syscall.SysProcAttr{
		Cloneflags:                 unix.CLONE_NEWUSER | unix.CLONE_NEWNET,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: os.Geteuid(), HostID: os.Geteuid(), Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: os.Getegid(), HostID: os.Getegid(), Size: 1}},
		GidMappingsEnableSetgroups: false,
	})
}

// probeExecDevNull starts /dev/null with attr: nil when the child got as
// far as the exec (which fails with EACCES), else the error.
func probeExecDevNull(attr *syscall.SysProcAttr) error {
	p, err := os.StartProcess(os.DevNull, []string{"probe"}, &os.ProcAttr{Sys: attr})
	if err == nil {
		_, _ = p.Wait()
		return errors.New("exec of /dev/null succeeded")
	}
	if errors.Is(err, unix.EACCES) {
		return nil
	}
	return err
}

// mountInfo is one line of /proc/self/mountinfo.
type mountInfo struct {
	root, point, fstype string
	superOpts           []string
}

// readMountInfo parses /proc/self/mountinfo.
func readMountInfo() ([]mountInfo, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mountInfo
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 {
			continue
		}
		out = append(out, mountInfo{
			root:      unescapeMount(a[3]),
			point:     unescapeMount(a[4]),
			fstype:    b[0],
			superOpts: strings.Split(b[2], ","),
		})
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range s[i+1 : i+4] {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + byte(c-'0')
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownCgroups maps each v1 controller (and "" for v2) to the server's path
// in that hierarchy, from /proc/self/cgroup.
func ownCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	out := make(map[string]string)
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for ctrl := range strings.SplitSeq(parts[1], ",") {
			out[ctrl] = parts[2]
		}
	}
	return out, nil
}

// cgroupDir joins a hierarchy's mount point with the server's path in it,
// relative to the mount's root (which differs inside a cgroup namespace).
func cgroupDir(m mountInfo, own string) string {
	rel := own
	if m.root != "/" {
		rel = strings.TrimPrefix(own, m.root)
	}
	return filepath.Join(m.point, rel)
}

// probeCgroups fills c.Pids and c.Memory: a delegated v2 controller if the
// server's own v2 cgroup gives it to its children, else a writable v1
// hierarchy.
func probeCgroups(c *Capabilities) {
	mounts, err := readMountInfo()
	if err != nil {
		c.Reasons["pids"], c.Reasons["memory"] = "no cgroups: "+err.Error(), "no cgroups: "+err.Error()
		return
	}
	own, err := ownCgroups()
	if err != nil {
		c.Reasons["pids"], c.Reasons["memory"] = "no cgroups: "+err.Error(), "no cgroups: "+err.Error()
		return
	}
	for _, ctrl := range []string{"pids", "memory"} {
		dst := &c.Pids
		if ctrl == "memory" {
			dst = &c.Memory
		}
		var why []string
		if ownV2, ok := own[""]; ok {
			for _, m := range mounts {
				if m.fstype != "cgroup2" {
					continue
				}
				dir := cgroupDir(m, ownV2)
				if err := v2Delegated(dir, ctrl, ownV2 == "/"); err != nil {
					why = append(why, "v2 at "+m.point+": "+err.Error())
					continue
				}
				*dst = Controller{Version: 2, Parent: dir}
				break
			}
		}
		if dst.Version != 0 {
			continue
		}
		for _, m := range mounts {
			if m.fstype != "cgroup" || !slices.Contains(m.superOpts, ctrl) {
				continue
			}
			path, ok := own[ctrl]
			if !ok {
				continue
			}
			dir := cgroupDir(m, path)
			probe := filepath.Join(dir, fmt.Sprintf("toolhost-probe-%d", os.Getpid()))
			if err := os.Mkdir(probe, 0o755); err != nil {
				why = append(why, "v1 at "+m.point+": "+err.Error())
				continue
			}
			_ = os.Remove(probe)
			*dst = Controller{Version: 1, Parent: dir}
			break
		}
		if dst.Version == 0 {
			if len(why) == 0 {
				why = append(why, "no hierarchy has it")
			}
			c.Reasons[ctrl] = "no cgroup " + ctrl + " controller: " + strings.Join(why, "; ")
		}
	}
}

// v2Delegated reports whether children of dir get controller ctrl: it is in
// dir's cgroup.subtree_control, or dir is the root of the hierarchy (exempt
// from the no-internal-processes rule) and enabling it there works. A cgroup
// that holds processes (the server's, usually) cannot give controllers to
// its children.
func v2Delegated(dir, ctrl string, isRoot bool) error {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	if slices.Contains(strings.Fields(string(b)), ctrl) {
		return nil
	}
	if !isRoot {
		return fmt.Errorf("%s is not in %s/cgroup.subtree_control", ctrl, dir)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+ctrl), 0); err != nil {
		return fmt.Errorf("enabling %s: %w", ctrl, err)
	}
	return nil
}
