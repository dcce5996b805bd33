package persist

import (
	"bytes"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// unixPair returns the two ends of a connected unix stream socket, closed
// at the end of the test.
func unixPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ends [2]*net.UnixConn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		ends[i] = c.(*net.UnixConn)
		t.Cleanup(func() { ends[i].Close() })
	}
	return ends[0], ends[1]
}

// servedAtOnce is a front's end of the socket whose holder, as soon as
// the frame is written, reads it, serves the connection it hands over and
// closes its end: all before the front runs again.
type servedAtOnce struct {
	*net.UnixConn
	holder *net.UnixConn
	got    []byte
	files  []*os.File
	err    error
}

func (s *servedAtOnce) WriteMsgUnix(b, oob []byte, addr *net.UnixAddr) (int, int, error) {
	n, oobn, err := s.UnixConn.WriteMsgUnix(b, oob, nil)
	if err == nil {
		s.got, s.files, s.err = recvFrame(s.holder, 3)
		s.holder.CloseRead()
		s.holder.Close()
	}
	return n, oobn, err
}

// TestSendFrameHolderDoneFirst: a hello written whole is handed over,
// even when the holder has served its connection and closed the socket
// before sendFrame returns (an MCP connection that a loaded front outlives
// by a few milliseconds exited 1 with "write: broken pipe").
func TestSendFrameHolderDoneFirst(t *testing.T) {
	front, holder := unixPair(t)
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	c := &servedAtOnce{UnixConn: front, holder: holder}
	if err := sendFrame(c, []byte(`{"v":1}`), []int{int(devnull.Fd())}); err != nil {
		t.Errorf("sendFrame once the holder served the frame and closed: %v, want nil", err)
	}
	if c.err != nil || string(c.got) != `{"v":1}` || len(c.files) != 1 {
		t.Errorf("the holder read %q and %d descriptors (err %v), want the hello and one", c.got, len(c.files), c.err)
	}
	for _, f := range c.files {
		f.Close()
	}
}

// TestSendFrameShortWrite: a frame larger than the socket's buffer is
// written in parts, and read whole, with its descriptors.
func TestSendFrameShortWrite(t *testing.T) {
	front, holder := unixPair(t)
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	big := bytes.Repeat([]byte("x"), 4<<20)
	type read struct {
		b     []byte
		files []*os.File
		err   error
	}
	got := make(chan read, 1)
	go func() { // owned by the test, which receives from got
		b, files, err := recvFrame(holder, 3)
		got <- read{b, files, err}
	}()
	if err := sendFrame(front, big, []int{int(devnull.Fd())}); err != nil {
		t.Errorf("sendFrame of %d bytes: %v", len(big), err)
	}
	r := <-got
	for _, f := range r.files {
		f.Close()
	}
	if r.err != nil || !bytes.Equal(r.b, big) || len(r.files) != 1 {
		t.Errorf("read %d bytes and %d descriptors (err %v), want %d and one", len(r.b), len(r.files), r.err, len(big))
	}
}
