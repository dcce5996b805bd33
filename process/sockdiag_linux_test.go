//go:build linux

package process

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
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

// TestListenReaderInOtherNamespace checks the listening sockets of a
// network namespace other than the server's, read through a socket made
// in it: a thread of the test unshares a namespace and listens there; the
// reader finds the socket there (and the server's namespace does not),
// and its fingerprint changes once it is closed.
func TestListenReaderInOtherNamespace(t *testing.T) {
	type inside struct {
		tid int
		ns  string
		l   net.Listener
		err error
	}
	ch := make(chan inside, 1)
	done := make(chan struct{})
	var owner sync.WaitGroup // owns the namespace's thread; waited below
	defer owner.Wait()
	defer close(done)
	owner.Go(func() {
		runtime.LockOSThread() // never unlocked: the thread leaves with its namespace
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ch <- inside{err: err}
			return
		}
		tid := unix.Gettid()
		ns, err := os.Readlink(fmt.Sprintf("/proc/self/task/%d/ns/net", tid))
		if err != nil {
			ch <- inside{err: err}
			return
		}
		l, err := net.Listen("tcp4", "0.0.0.0:0")
		ch <- inside{tid: tid, ns: ns, l: l, err: err}
		<-done
	})
	in := <-ch
	if errors.Is(in.err, unix.EPERM) {
		t.Skipf("cannot make a network namespace here (%v): needs CAP_SYS_ADMIN", in.err)
	}
	if in.err != nil {
		t.Fatal(in.err)
	}
	ino := inodeOf(t, in.l)
	if in.ns == hostNetNS() {
		t.Fatalf("the thread's namespace %s is the server's", in.ns)
	}

	var r listenReader
	defer r.close()
	ls, ok := r.of(in.ns, in.tid)
	if !ok {
		t.Fatalf("the reader cannot read namespace %s", in.ns)
	}
	want := listenSocket{addr: "0.0.0.0", port: in.l.Addr().(*net.TCPAddr).Port}
	if diff := cmp.Diff(want, ls[ino], cmp.AllowUnexported(listenSocket{})); diff != "" {
		t.Errorf("socket %d mismatch (-want +got):\n%s", ino, diff)
	}
	host, err := hostListeners()
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := host[ino]; ok {
		t.Errorf("the server's namespace lists the other namespace's socket: %+v", s)
	}
	before, ok := r.fingerprint(in.ns, in.tid)
	if !ok {
		t.Fatal("no fingerprint of the other namespace")
	}
	in.l.Close()
	if after, _ := r.fingerprint(in.ns, in.tid); after == before {
		t.Error("the fingerprint did not change when the socket stopped listening")
	}
	if _, ok := r.of("net:[1]", in.tid); ok {
		t.Error("the reader read a namespace the pid is not in")
	}
}
