package persist

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// maxHello bounds a hello: a command line, an environment and the bytes
// read before it (at most frontPeek).
const maxHello = 8 << 20

// frameConn is what sendFrame writes on: a *net.UnixConn.
type frameConn interface {
	WriteMsgUnix(b, oob []byte, addr *net.UnixAddr) (n, oobn int, err error)
	Write(b []byte) (int, error)
}

// sendFrame writes a length-prefixed frame on c, with fds attached to its
// first byte when given. Only a short first write is followed by another:
// once the whole frame is written, its reader may already have served it
// and closed (a front's hello, whose connection can end before the front
// runs again), and any write on c then fails with EPIPE, even an empty one.
func sendFrame(c frameConn, b []byte, fds []int) error {
	buf := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	n, _, err := c.WriteMsgUnix(buf, oob, nil)
	if err != nil || n == len(buf) {
		return err
	}
	_, err = c.Write(buf[n:])
	return err
}

// recvFrame reads a length-prefixed frame from c and the fds sent with it
// (want at most).
func recvFrame(c *net.UnixConn, want int) ([]byte, []*os.File, error) {
	head := make([]byte, 4)
	oob := make([]byte, unix.CmsgSpace(4*max(want, 1)))
	n, oobn, _, _, err := c.ReadMsgUnix(head, oob)
	if err != nil {
		return nil, nil, err
	}
	var files []*os.File
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return nil, nil, err
		}
		for _, m := range msgs {
			fds, err := unix.ParseUnixRights(&m)
			if err != nil {
				continue
			}
			for _, fd := range fds {
				unix.CloseOnExec(fd)
				files = append(files, os.NewFile(uintptr(fd), "fd"+strconv.Itoa(fd)))
			}
		}
	}
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	if _, err := io.ReadFull(c, head[n:]); err != nil {
		closeAll()
		return nil, nil, err
	}
	size := binary.BigEndian.Uint32(head)
	if size > maxHello {
		closeAll()
		return nil, nil, fmt.Errorf("a frame of %d bytes is over %d", size, maxHello)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(c, b); err != nil {
		closeAll()
		return nil, nil, err
	}
	return b, files, nil
}

// peerUID returns the uid of the process at the other end of c.
func peerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var (
		cred *unix.Ucred
		cerr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return int(cred.Uid), nil
}

// procStart returns pid's start time in clock ticks since boot, or 0 when
// it is gone (a zombie is gone: it runs no code and holds no lock).
func procStart(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}

// alive reports whether the holder h still runs.
func (h holderID) alive() bool {
	return h.PID > 0 && procStart(h.PID) == h.Start && h.Start != 0
}

// self names this process as a holder.
func self() holderID {
	return holderID{PID: os.Getpid(), Start: procStart(os.Getpid())}
}

// BuildID names this binary: its device, inode, size and modification
// time, read once. Two builds of one version are told apart.
func BuildID(version string) string {
	fi, err := os.Stat("/proc/self/exe")
	if err != nil {
		return version
	}
	var st unix.Stat_t
	if unix.Stat("/proc/self/exe", &st) != nil {
		return version
	}
	return fmt.Sprintf("%s/%d:%d/%d/%d", version, st.Dev, st.Ino, fi.Size(), fi.ModTime().UnixNano())
}

// supported says this platform persists sessions.
const supported = true

// pollable returns a duplicate of f whose reads the runtime polls, so
// that closing it ends a read blocked on it, and a function that makes
// f's open file description blocking again (it is shared with the front,
// and maybe the client's terminal).
func pollable(f *os.File) (*os.File, func(), error) {
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return nil, nil, err
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, nil, err
	}
	restore := func() { _ = unix.SetNonblock(int(f.Fd()), false) }
	return os.NewFile(uintptr(fd), f.Name()), restore, nil
}
