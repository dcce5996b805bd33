//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/toolhost/toolhost/internal/testtmp"
)

// helperEnv names the variable that turns the test binary into a helper
// process: the confined commands of the tests are this binary, so that
// they make exactly one system call of interest and print its outcome.
const helperEnv = "SANDBOX_TEST_HELPER"

// TestMain runs the helper when asked, else the tests, and then waits for
// the confining goroutines of every Start.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		fmt.Println(helper(os.Args[1:]))
		os.Exit(0)
	}
	bin, done, err := testtmp.OutOfTmp("sb")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	helperBin = bin
	code := m.Run()
	Drain() // every test finishes its sandboxes: a leak hangs here
	done()
	os.Exit(code)
}

// helperBin is this test binary, at a path a confined command sees
// (testtmp.OutOfTmp: the private /tmp's own tests make their files in /tmp
// again).
var helperBin = os.Args[0]

// outcome renders a system call's error the way the tests compare it.
func outcome(op string, err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return op + ": " + unix.ErrnoName(errno)
	}
	if err != nil {
		return op + ": " + err.Error()
	}
	return op + ": ok"
}

// helper performs one operation of args and describes its outcome.
func helper(args []string) string {
	if len(args) == 0 {
		return "no operation"
	}
	op, args := args[0], args[1:]
	switch op {
	case "tcp-connect":
		ap := netip.MustParseAddrPort(args[0])
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err != nil {
			return outcome("socket", err)
		}
		return outcome("connect", unix.Connect(fd, &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}))
	case "tcp-bind":
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err != nil {
			return outcome("socket", err)
		}
		return outcome("bind", unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	case "tcp-listen":
		// Listens on 127.0.0.1, says on which port, answers each
		// connection with "inside", and stops at the end of stdin.
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return outcome("listen", err)
		}
		fmt.Println("listening", l.Addr().(*net.TCPAddr).Port)
		go func() { // ends with the process
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				_, _ = c.Write([]byte("inside\n"))
				_ = c.Close()
			}
		}()
		_, _ = io.Copy(io.Discard, os.Stdin)
		return "done"
	case "udp-send":
		ap := netip.MustParseAddrPort(args[0])
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
		if err != nil {
			return outcome("socket", err)
		}
		return outcome("sendto", unix.Sendto(fd, []byte(args[1]), 0, &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}))
	case "abstract-connect":
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err != nil {
			return outcome("socket", err)
		}
		return outcome("connect", unix.Connect(fd, &unix.SockaddrUnix{Name: "@" + args[0]}))
	case "kill":
		pid, _ := strconv.Atoi(args[0])
		sig, _ := strconv.Atoi(args[1])
		return outcome("kill", unix.Kill(pid, unix.Signal(sig)))
	case "unix-bind":
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err != nil {
			return outcome("socket", err)
		}
		return outcome("bind", unix.Bind(fd, &unix.SockaddrUnix{Name: args[0]}))
	case "setpriority":
		pid, _ := strconv.Atoi(args[0])
		return outcome("setpriority", unix.Setpriority(unix.PRIO_PROCESS, pid, 5))
	case "read":
		_, err := os.ReadFile(args[0])
		return outcome("read", err)
	case "unix-connect":
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err != nil {
			return outcome("socket", err)
		}
		return outcome("connect", unix.Connect(fd, &unix.SockaddrUnix{Name: args[0]}))
	case "socketpair":
		typ := unix.SOCK_STREAM
		if args[0] == "dgram" {
			typ = unix.SOCK_DGRAM
		}
		fds, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return outcome("socketpair", err)
		}
		if _, err := unix.Write(fds[0], []byte("x")); err != nil {
			return outcome("write", err)
		}
		b := make([]byte, 1)
		_, err = unix.Read(fds[1], b)
		return outcome("socketpair", err)
	case "unix-echo":
		// A server and its client on a pathname socket, both in here.
		ln, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err != nil {
			return outcome("socket", err)
		}
		if err := unix.Bind(ln, &unix.SockaddrUnix{Name: args[0]}); err != nil {
			return outcome("bind", err)
		}
		if err := unix.Listen(ln, 1); err != nil {
			return outcome("listen", err)
		}
		c, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err != nil {
			return outcome("socket", err)
		}
		if err := unix.Connect(c, &unix.SockaddrUnix{Name: args[0]}); err != nil {
			return outcome("connect", err)
		}
		s, _, err := unix.Accept(ln)
		if err != nil {
			return outcome("accept", err)
		}
		if _, err := unix.Write(c, []byte("x")); err != nil {
			return outcome("write", err)
		}
		b := make([]byte, 1)
		_, err = unix.Read(s, b)
		return outcome("echo", err)
	case "ptrace-attach":
		pid, _ := strconv.Atoi(args[0])
		return outcome("ptrace", unix.PtraceAttach(pid))
	case "open-write":
		fd, err := unix.Open(args[0], unix.O_WRONLY, 0)
		if err == nil {
			_ = unix.Close(fd)
		}
		return outcome("open", err)
	case "rlimit-cpu":
		var r unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_CPU, &r); err != nil {
			return outcome("getrlimit", err)
		}
		return fmt.Sprintf("cpu %d %d", r.Cur, r.Max)
	case "alloc":
		// Touch 1 MiB blocks until the kernel stops it.
		var keep [][]byte
		for range 4096 {
			b := make([]byte, 1<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			keep = append(keep, b)
		}
		return fmt.Sprintf("alloc: %d MiB survived", len(keep))
	}
	return "unknown operation " + op
}
