//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// NetNS is a thread of the server that has entered another network
// namespace, a command's, to open connections there for the server: the
// inside end of a port forward to a server the command listens with. A
// socket belongs to the namespace of the thread that creates it, so every
// Dial runs on that thread (one at a time); what is done with the
// connection after is done from any thread. Make one with EnterNetNS and
// Close it when done.
type NetNS struct {
	// reqs carries each Dial to the thread; quit, closed by Close, ends
	// it; done is closed by the thread's goroutine as it returns.
	reqs chan nsDial
	quit chan struct{}
	done chan struct{}
	// closeOnce guards closing quit.
	closeOnce sync.Once
}

// nsDial is one Dial for the thread; reply is buffered (1).
type nsDial struct {
	ctx           context.Context
	network, addr string
	reply         chan nsDialed
}

// nsDialed is the thread's answer to an nsDial.
type nsDialed struct {
	conn net.Conn
	err  error
}

// errNetNSClosed is Dial's error after Close.
var errNetNSClosed = errors.New("network namespace: closed")

// EnterNetNS starts a thread in the network namespace ns refers to (an
// open /proc/<pid>/ns/net); the caller may close ns once it returns. The
// thread is locked to its goroutine and never given back (goLocked), so
// the runtime ends it, still in the namespace, when Close lets the
// goroutine return; no other goroutine ever runs on it, and the runtime
// clones no thread from it. setns needs CAP_SYS_ADMIN, as unsharing the
// namespace did: a server that made it with a user namespace instead
// cannot enter it.
func EnterNetNS(ns *os.File) (*NetNS, error) {
	sc, err := ns.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("network namespace: %w", err)
	}
	n := &NetNS{reqs: make(chan nsDial), quit: make(chan struct{}), done: make(chan struct{})}
	entered := make(chan error, 1)
	var serr error
	cerr := sc.Control(func(fd uintptr) {
		goLocked(func() {
			defer close(n.done)
			if err := unix.Setns(int(fd), unix.CLONE_NEWNET); err != nil {
				entered <- fmt.Errorf("network namespace: setns: %w", err)
				return // the thread exits, in whichever namespace it is
			}
			entered <- nil
			n.serve()
		})
		serr = <-entered // fd stays open until the thread has used it
	})
	if cerr != nil {
		return nil, fmt.Errorf("network namespace: %w", cerr)
	}
	runtime.KeepAlive(ns)
	if serr != nil {
		return nil, serr
	}
	return n, nil
}

// serve runs on the namespace's thread: it dials for each request until
// Close.
func (n *NetNS) serve() {
	for {
		select {
		case <-n.quit:
			return
		case r := <-n.reqs:
			var d net.Dialer
			c, err := d.DialContext(r.ctx, r.network, r.addr)
			r.reply <- nsDialed{c, err}
		}
	}
}

// Dial connects to addr ("127.0.0.1:3000", "[::1]:3000") on network
// ("tcp", "tcp4", "tcp6") inside the namespace. Pass an address, not a
// name: the thread resolves nothing. ctx bounds the wait for the thread
// and the dial.
func (n *NetNS) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	r := nsDial{ctx: ctx, network: network, addr: addr, reply: make(chan nsDialed, 1)}
	select {
	case n.reqs <- r:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-n.done:
		return nil, errNetNSClosed
	}
	d := <-r.reply
	return d.conn, d.err
}

// Close ends the thread once a Dial it runs has returned, and waits for
// its goroutine to return (the runtime then ends the thread). Later Dials
// fail. It is idempotent.
func (n *NetNS) Close() error {
	n.closeOnce.Do(func() { close(n.quit) })
	<-n.done
	return nil
}
