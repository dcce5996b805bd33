//go:build linux

package process

import (
	"net"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// inodeOf returns the inode of a listener's socket.
func inodeOf(t *testing.T, l net.Listener) uint64 {
	t.Helper()
	raw, err := l.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = syscall.Fstat(int(fd), &st) }); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
	return st.Ino
}

// TestHostListeners checks the kernel's socket diagnostics against
// listeners of this process, IPv4 and IPv6: each is found by its inode
// with its address and port while it listens, and gone once closed.
// (Other processes' sockets come and go meanwhile: only these inodes are
// looked at.)
func TestHostListeners(t *testing.T) {
	for _, tc := range []struct{ network, addr, want string }{
		{"tcp4", "127.0.0.1:0", "127.0.0.1"},
		{"tcp4", "0.0.0.0:0", "0.0.0.0"},
		{"tcp6", "[::1]:0", "::1"},
	} {
		l, err := net.Listen(tc.network, tc.addr)
		if err != nil {
			if tc.network == "tcp6" {
				t.Logf("no IPv6 loopback here (%v): only IPv4 is checked", err)
				continue
			}
			t.Fatal(err)
		}
		ino := inodeOf(t, l)
		ls, err := hostListeners()
		if err != nil {
			t.Fatalf("hostListeners: %v", err)
		}
		want := listenSocket{addr: tc.want, port: l.Addr().(*net.TCPAddr).Port}
		if diff := cmp.Diff(want, ls[ino], cmp.AllowUnexported(listenSocket{})); diff != "" {
			t.Errorf("%s %s: socket %d mismatch (-want +got):\n%s", tc.network, tc.addr, ino, diff)
		}
		l.Close()
		ls, err = hostListeners()
		if err != nil {
			t.Fatalf("hostListeners: %v", err)
		}
		if s, ok := ls[ino]; ok {
			t.Errorf("%s %s: socket %d still listed after Close: %+v", tc.network, tc.addr, ino, s)
		}
	}
}

// TestListenFingerprint checks that a set of listening sockets'
// fingerprint changes when one is added, removed, or listens elsewhere,
// and comes back with the set; and that only the server's own namespace
// has one.
func TestListenFingerprint(t *testing.T) {
	set := map[uint64]listenSocket{10: {"127.0.0.1", 8080}, 11: {"::", 22}}
	base := fingerprintOf(set)
	set[12] = listenSocket{"0.0.0.0", 3000}
	if fingerprintOf(set) == base {
		t.Error("a socket that starts listening leaves the fingerprint as it was")
	}
	delete(set, 12)
	if fingerprintOf(set) != base {
		t.Error("the same sockets give another fingerprint")
	}
	set[11] = listenSocket{"::", 23}
	if fingerprintOf(set) == base {
		t.Error("a socket listening on another port leaves the fingerprint as it was")
	}
	delete(set, 11)
	if fingerprintOf(set) == base {
		t.Error("a socket that stops listening leaves the fingerprint as it was")
	}
	if _, ok := listenFingerprint(hostNetNS()); !ok {
		t.Error("no fingerprint of the server's namespace")
	}
	for _, ns := range []string{"", "net:[1]"} {
		if _, ok := listenFingerprint(ns); ok {
			t.Errorf("a fingerprint of namespace %q, not the server's", ns)
		}
	}
}
