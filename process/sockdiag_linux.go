//go:build linux

package process

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// listenSocket is a TCP socket in LISTEN state: its address and port.
type listenSocket struct {
	addr string // "0.0.0.0", "::", "127.0.0.1", …
	port int
}

// The parts of <linux/inet_diag.h> that hostListeners uses; x/sys does
// not define them.
const (
	tcpListen          = 10       // TCP_LISTEN, in idiag_states as 1 << tcpListen
	inetDiagReqV2Size  = 56       // struct inet_diag_req_v2
	inetDiagMsgSize    = 72       // struct inet_diag_msg
	inetDiagInodeAt    = 68       // inet_diag_msg.idiag_inode
	inetDiagSportAt    = 4        // inet_diag_msg.id.idiag_sport, big endian
	inetDiagSrcAt      = 8        // inet_diag_msg.id.idiag_src, 16 bytes
	sockDiagRecvBuffer = 64 << 10 // more than a dump's part ever is (ss uses 32 KiB)
)

// hostListeners returns the TCP sockets in LISTEN state of the server's
// own network namespace, IPv4 and IPv6, by inode, from the kernel's
// socket diagnostics (NETLINK_SOCK_DIAG, as ss -lt asks). The kernel walks
// only its table of listening sockets for it: reading /proc/net/tcp walks
// the whole table of connections, empty buckets and all, which costs
// far more even with only a few sockets in it. The netlink socket belongs
// to the namespace of the thread that makes it: the caller's goroutine
// must not be locked to a confining thread (no goroutine but a confining
// one ever is).
func hostListeners() (map[uint64]listenSocket, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("sock_diag: %w", err)
	}
	defer unix.Close(fd)
	return diagListeners(fd)
}

// diagListeners returns the TCP sockets in LISTEN state of the network
// namespace of fd, a NETLINK_SOCK_DIAG socket, by inode.
func diagListeners(fd int) (map[uint64]listenSocket, error) {
	out := map[uint64]listenSocket{}
	buf := make([]byte, sockDiagRecvBuffer)
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		if err := sockDiagDump(fd, family, buf, out); err != nil {
			if family == unix.AF_INET6 && errors.Is(err, unix.ENOENT) {
				continue // IPv6 off
			}
			return nil, err
		}
	}
	return out, nil
}

// listenReader reads the listening sockets of the network namespaces a
// command's tree is in, for its port watcher: the server's own through
// hostListeners, and one other, the command's own when it has one,
// through a NETLINK_SOCK_DIAG socket made in it (by a thread entered into
// it with setns, as sandbox.EnterNetNS enters one), kept until close. Only
// the watcher's goroutine uses it.
type listenReader struct {
	ns   string   // the other namespace's link; "" while none is entered
	diag *os.File // its socket; nil while none is entered
}

// of returns the listening sockets of namespace ns, which pid is in;
// false if they cannot be read so (the caller reads /proc instead).
func (r *listenReader) of(ns string, pid int) (map[uint64]listenSocket, bool) {
	if ns == "" {
		return nil, false
	}
	if ns == hostNetNS() {
		ls, err := hostListeners()
		return ls, err == nil
	}
	if ns != r.ns || r.diag == nil {
		// Entered once for the namespace, and again after a failure (the
		// process chosen to enter it by may have just exited).
		r.close()
		f, err := diagSocketIn(pid, ns)
		if err != nil {
			return nil, false
		}
		r.ns, r.diag = ns, f
	}
	rc, err := r.diag.SyscallConn()
	if err != nil {
		return nil, false
	}
	var ls map[uint64]listenSocket
	if cerr := rc.Control(func(fd uintptr) { ls, err = diagListeners(int(fd)) }); cerr != nil || err != nil {
		return nil, false
	}
	return ls, true
}

// fingerprint returns the fingerprint of namespace ns's listening
// sockets (listenFingerprint's, shared, for the server's own); false if
// they cannot be read.
func (r *listenReader) fingerprint(ns string, pid int) (uint64, bool) {
	if ns == hostNetNS() {
		return listenFingerprint(ns)
	}
	ls, ok := r.of(ns, pid)
	if !ok {
		return 0, false
	}
	return fingerprintOf(ls), true
}

// close closes the socket of the other namespace, if any.
func (r *listenReader) close() {
	if r.diag != nil {
		r.diag.Close()
		r.diag = nil
	}
	r.ns = ""
}

// diagSocketIn makes a NETLINK_SOCK_DIAG socket in the network namespace
// of pid, which must be ns (checked through the namespace file opened,
// so that a pid reused meanwhile is not believed). A socket belongs to the
// namespace of the thread that makes it: a goroutine locked to a thread
// of its own enters the namespace (setns needs CAP_SYS_ADMIN there, as the
// namespace's making did), makes the socket, and returns still locked,
// so that the runtime ends the thread rather than reuse it elsewhere.
// diagSocketIn waits for it.
func diagSocketIn(pid int, ns string) (*os.File, error) {
	nsf, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		return nil, err
	}
	defer nsf.Close()
	if link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(nsf.Fd()))); err != nil || link != ns {
		return nil, fmt.Errorf("sock_diag: pid %d is no longer in %s", pid, ns)
	}
	type made struct {
		f   *os.File
		err error
	}
	ch := make(chan made, 1)
	go func() { // owned by diagSocketIn, which waits on ch
		runtime.LockOSThread() // never unlocked: see above
		if err := unix.Setns(int(nsf.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- made{err: fmt.Errorf("sock_diag: enter %s: %w", ns, err)}
			return
		}
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
		if err != nil {
			ch <- made{err: fmt.Errorf("sock_diag: %w", err)}
			return
		}
		ch <- made{f: os.NewFile(uintptr(fd), "sock_diag "+ns)}
	}()
	m := <-ch
	return m.f, m.err
}

// diagSeq numbers the dumps asked for, so that each reads only its own
// answer.
var diagSeq atomic.Uint32

// sockDiagDump asks fd for the listening TCP sockets of one family and
// adds them to out.
func sockDiagDump(fd int, family uint8, buf []byte, out map[uint64]listenSocket) error {
	req := make([]byte, unix.SizeofNlMsghdr+inetDiagReqV2Size)
	hdr := (*unix.NlMsghdr)(unsafe.Pointer(&req[0]))
	hdr.Len = uint32(len(req))
	hdr.Type = unix.SOCK_DIAG_BY_FAMILY
	hdr.Flags = unix.NLM_F_REQUEST | unix.NLM_F_DUMP
	seq := diagSeq.Add(1)
	hdr.Seq = seq
	body := req[unix.SizeofNlMsghdr:]
	body[0] = family
	body[1] = unix.IPPROTO_TCP
	binary.NativeEndian.PutUint32(body[4:8], 1<<tcpListen)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("sock_diag: %w", err)
	}
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("sock_diag: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return fmt.Errorf("sock_diag: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue // the rest of a dump an error cut short, on a kept socket
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if code := int32(binary.NativeEndian.Uint32(m.Data[:4])); code != 0 {
						return fmt.Errorf("sock_diag: %w", unix.Errno(-code))
					}
				}
				return nil
			case unix.SOCK_DIAG_BY_FAMILY:
				if s, ino, ok := parseInetDiagMsg(m.Data); ok {
					out[ino] = s
				}
			}
		}
	}
}

// parseInetDiagMsg reads a struct inet_diag_msg: the socket's family,
// source address and port, and inode.
func parseInetDiagMsg(b []byte) (listenSocket, uint64, bool) {
	if len(b) < inetDiagMsgSize {
		return listenSocket{}, 0, false
	}
	port := int(binary.BigEndian.Uint16(b[inetDiagSportAt:]))
	var ip netip.Addr
	switch b[0] {
	case unix.AF_INET:
		ip = netip.AddrFrom4([4]byte(b[inetDiagSrcAt : inetDiagSrcAt+4]))
	case unix.AF_INET6:
		ip = netip.AddrFrom16([16]byte(b[inetDiagSrcAt : inetDiagSrcAt+16])).Unmap()
	default:
		return listenSocket{}, 0, false
	}
	ino := uint64(binary.NativeEndian.Uint32(b[inetDiagInodeAt:]))
	return listenSocket{addr: ip.String(), port: port}, ino, true
}

// netnsOf returns the link of pid's network namespace, "net:[4026531840]",
// or "" if it cannot be read.
func netnsOf(pid int) string {
	ns, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
	return ns
}

// hostListenSum is the last fingerprint of the server's namespace's
// listening sockets, shared by every command's port scan in it.
var hostListenSum struct {
	mu  sync.Mutex
	at  time.Time // when sum was taken; guarded by mu
	sum uint64    // guarded by mu
}

// listenSumFresh is how long a fingerprint serves every command: it
// delays a command's seeing a new listener by this much at most, against
// portScanEvery.
const listenSumFresh = 20 * time.Millisecond

// listenSeed keys the fingerprints.
var listenSeed = maphash.MakeSeed()

// listenFingerprint returns a fingerprint of the listening TCP sockets of
// network namespace ns (their inodes, addresses and ports): a socket that
// starts or stops listening there changes it. It knows only the server's
// own namespace, whose sockets hostListeners reads cheaply; for another,
// or if they cannot be read, it returns false.
func listenFingerprint(ns string) (uint64, bool) {
	if ns == "" || ns != hostNetNS() {
		return 0, false
	}
	hostListenSum.mu.Lock()
	defer hostListenSum.mu.Unlock()
	if now := time.Now(); now.Sub(hostListenSum.at) < listenSumFresh {
		return hostListenSum.sum, true
	}
	ls, err := hostListeners()
	if err != nil {
		return 0, false
	}
	hostListenSum.at, hostListenSum.sum = time.Now(), fingerprintOf(ls)
	return hostListenSum.sum, true
}

// fingerprintOf returns the fingerprint of a set of listening sockets:
// the sum of each one's keyed hash, so that the map's order does not
// matter.
func fingerprintOf(ls map[uint64]listenSocket) uint64 {
	var sum uint64
	for ino, l := range ls {
		sum += maphash.Comparable(listenSeed, struct {
			ino uint64
			l   listenSocket
		}{ino, l})
	}
	return sum
}
