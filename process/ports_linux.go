//go:build linux

package process

import (
	"bufio"
	"encoding/hex"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
)

// listeners returns the TCP sockets in LISTEN state, IPv4 and IPv6, held
// by the given processes: each one's socket inodes (its fds) matched
// against the listening sockets of its own network namespace, which each
// socket found there is in: from the kernel's socket diagnostics through
// r where it can, else from the namespace's /proc tables.
func listeners(pids []int, r *listenReader) []listening {
	holder := map[string]int{} // socket inode → a pid holding it
	nsPid := map[string]int{}  // network namespace → a pid in it
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid)
		fds, err := readdirnames(dir + "/fd")
		if err != nil {
			continue
		}
		sockets := false
		for _, fd := range fds {
			l, err := os.Readlink(dir + "/fd/" + fd)
			if err != nil {
				continue
			}
			if ino, ok := strings.CutPrefix(l, "socket:["); ok {
				holder[strings.TrimSuffix(ino, "]")] = pid
				sockets = true
			}
		}
		if !sockets {
			continue
		}
		if ns, err := os.Readlink(dir + "/ns/net"); err == nil {
			if _, ok := nsPid[ns]; !ok {
				nsPid[ns] = pid
			}
		}
	}
	if len(holder) == 0 {
		return nil
	}
	var out []listening
	for ns, pid := range nsPid {
		if ls, ok := r.of(ns, pid); ok {
			for ino, h := range holder {
				n, err := strconv.ParseUint(ino, 10, 64)
				if l, ok := ls[n]; ok && err == nil {
					out = append(out, listening{Port: Port{Port: l.port, Address: l.addr, PID: h}, netns: ns, nsPID: pid})
				}
			}
			continue
		}
		for _, table := range []string{"tcp", "tcp6"} {
			out = appendListening(out, "/proc/"+strconv.Itoa(pid)+"/net/"+table, holder, ns, pid)
		}
	}
	return out
}

// hostNetNS is the server's own network namespace's link, read once:
// its main thread never leaves it (confining threads are never the main
// thread).
var hostNetNS = sync.OnceValue(func() string { return netnsOf(os.Getpid()) })

// appendListening adds the LISTEN sockets of a /proc/net/tcp{,6} table
// that holder knows; the table is network namespace ns's, which nsPID is
// in.
func appendListening(out []listening, path string, holder map[string]int, ns string, nsPID int) []listening {
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		if len(fs) < 10 || fs[3] != "0A" {
			continue
		}
		pid, ok := holder[fs[9]]
		if !ok {
			continue
		}
		addr, port, ok := parseProcAddr(fs[1])
		if !ok {
			continue
		}
		out = append(out, listening{Port: Port{Port: port, Address: addr, PID: pid}, netns: ns, nsPID: nsPID})
	}
	return out
}

// parseProcAddr parses "0100007F:1F90" or its 32-digit IPv6 form: the
// address is in 32-bit words of host (little-endian) order.
func parseProcAddr(s string) (string, int, bool) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return "", 0, false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return "", 0, false
	}
	raw, err := hex.DecodeString(a)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return "", 0, false
	}
	for i := 0; i < len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	ip, ok := netip.AddrFromSlice(raw)
	if !ok {
		return "", 0, false
	}
	return ip.Unmap().String(), int(port), true
}

// readdirnames lists the names in dir, unsorted (os.ReadDir sorts them).
func readdirnames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}
