package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/toolhost/toolhost/sandbox"
)

// forwardDialTimeout bounds a forward's connection into the namespace.
const forwardDialTimeout = 10 * time.Second

// forwards are the port forwards of one command's port watcher into the
// network namespaces of its processes: a listener on the server's
// loopback per forwarded socket, and a thread per namespace that has
// forwards (sandbox.NetNS), which makes their connections inside. Only the
// watcher's goroutine uses it; close ends everything.
type forwards struct {
	log   *slog.Logger
	byKey map[portKey]*forward
	// ns are the namespaces' threads by namespace link, each with the
	// number of forwards that use it; a thread is closed with its last
	// forward.
	ns map[string]*nsUse
}

// nsUse is a namespace's thread and how many forwards use it.
type nsUse struct {
	ns *sandbox.NetNS
	n  int
}

// newForwards returns an empty set of forwards that logs to log.
func newForwards(log *slog.Logger) *forwards {
	return &forwards{log: log, byKey: make(map[portKey]*forward), ns: make(map[string]*nsUse)}
}

// start forwards a port of the server's loopback to l, inside its
// namespace, and returns the host side's address.
func (fs *forwards) start(k portKey, l listening) (netip.AddrPort, error) {
	u := fs.ns[l.netns]
	if u == nil {
		ns, err := enterNetNS(l.nsPID, l.netns)
		if err != nil {
			return netip.AddrPort{}, err
		}
		u = &nsUse{ns: ns}
		fs.ns[l.netns] = u
	}
	network, target := insideTarget(l.Address, l.Port.Port)
	f, err := newForward(func(ctx context.Context) (net.Conn, error) {
		return u.ns.Dial(ctx, network, target)
	}, fs.log.With("port", l.Port.Port, "address", l.Address))
	if err != nil {
		if u.n == 0 {
			_ = u.ns.Close()
			delete(fs.ns, l.netns)
		}
		return netip.AddrPort{}, err
	}
	u.n++
	fs.byKey[k] = f
	return f.addr, nil
}

// stop ends the forward of k, if any: its listener and connections are
// closed when it returns.
func (fs *forwards) stop(k portKey) {
	f := fs.byKey[k]
	if f == nil {
		return
	}
	delete(fs.byKey, k)
	f.close()
	if u := fs.ns[k.netns]; u != nil {
		if u.n--; u.n == 0 {
			_ = u.ns.Close()
			delete(fs.ns, k.netns)
		}
	}
}

// close ends every forward and namespace thread.
func (fs *forwards) close() {
	for k := range fs.byKey {
		fs.stop(k)
	}
	for k, u := range fs.ns { // none left, unless a start failed halfway
		_ = u.ns.Close()
		delete(fs.ns, k)
	}
}

// insideTarget returns where a forward connects for a socket listening on
// addr and port: the loopback of its family for a wildcard address, else
// the address itself (in a namespace of its own, a command has nothing but
// its loopback).
func insideTarget(addr string, port int) (network, target string) {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		a = netip.IPv4Unspecified()
	}
	switch {
	case a == netip.IPv4Unspecified():
		a = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	case a == netip.IPv6Unspecified():
		a = netip.IPv6Loopback()
	}
	network = "tcp4"
	if a.Is6() {
		network = "tcp6"
	}
	return network, netip.AddrPortFrom(a, uint16(port)).String()
}

// forward is one port forward: a listener on the server's loopback whose
// every connection is joined to a new connection made inside a command's
// network namespace.
type forward struct {
	ln   net.Listener
	addr netip.AddrPort // the listener's
	dial func(context.Context) (net.Conn, error)
	log  *slog.Logger
	// ctx is cancelled by close: it ends dials in flight.
	ctx    context.Context
	cancel context.CancelFunc
	// wg owns the accept loop and each connection's joiner (which owns the
	// goroutine of its second direction and waits for it); close waits for
	// it. Add is called by newForward, or with mu held and closed false.
	wg sync.WaitGroup

	mu sync.Mutex // guards closed and conns
	// closed is set once, by close; nothing is tracked or started after.
	closed bool
	// conns are the open connections, both ends; each is removed by
	// whoever closes it.
	conns map[net.Conn]struct{}
}

// newForward listens on 127.0.0.1, port chosen by the kernel, and serves
// each connection with one dial makes.
func newForward(dial func(context.Context) (net.Conn, error), log *slog.Logger) (*forward, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("port forward: %w", err)
	}
	f := &forward{ln: ln, addr: ln.Addr().(*net.TCPAddr).AddrPort(), dial: dial, log: log, conns: make(map[net.Conn]struct{})}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

// accept serves the listener until close.
func (f *forward) accept() {
	defer f.wg.Done()
	var backoff time.Duration
	for {
		c, err := f.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors, or an aborted handshake: wait a little
			// and accept again, until close.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-f.ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			c.Close()
			return
		}
		f.conns[c] = struct{}{}
		f.wg.Add(1)
		f.mu.Unlock()
		go f.join(c)
	}
}

// track records a connection so that close ends it; after close it
// closes c and reports false.
func (f *forward) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		c.Close()
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

// untrack closes c and forgets it.
func (f *forward) untrack(c net.Conn) {
	c.Close()
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
}

// join connects c, accepted on the server's loopback, to a new connection
// inside the namespace, and copies both ways until both directions end
// (each end's write side is shut when its source reaches EOF) or close.
func (f *forward) join(c net.Conn) {
	defer f.wg.Done()
	defer f.untrack(c)
	ctx, cancel := context.WithTimeout(f.ctx, forwardDialTimeout)
	in, err := f.dial(ctx)
	cancel()
	if err != nil {
		f.log.Debug("port forward: cannot connect inside the namespace", "err", err)
		return
	}
	if !f.track(in) {
		return
	}
	defer f.untrack(in)
	var out sync.WaitGroup // owns the host-to-inside copy; waited below
	out.Go(func() { copyHalf(in, c) })
	copyHalf(c, in)
	out.Wait()
}

// copyHalf copies src to dst until EOF or an error, then shuts dst's
// write side so that its peer sees the end; on an error it closes both,
// which ends the other direction too.
func copyHalf(dst, src net.Conn) {
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		src.Close()
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// close closes the listener and every connection, and waits for every
// goroutine of the forward.
func (f *forward) close() {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		f.cancel()
		f.ln.Close()
		for c := range f.conns {
			c.Close()
		}
	}
	f.mu.Unlock()
	f.wg.Wait()
}
