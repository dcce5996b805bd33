package process

import (
	"slices"
	"time"
)

// portScanEvery is how often a handle's process tree is looked at for
// listening sockets while it runs; nothing is scanned when no handle runs.
const portScanEvery = 200 * time.Millisecond

// portFullScanEvery bounds the scans of a handle's tree skipped in a row
// while the listening sockets of its network namespace stay as they were
// (listenFingerprint): every portFullScanEvery-th is whole anyway, for a
// process of the tree in another namespace, or a listening socket handed
// out of the tree.
const portFullScanEvery = 10

// Port is a TCP socket in LISTEN state held by a process of a command,
// and where this machine reaches it.
type Port struct {
	// Port and Address are where this machine reaches the socket: its own
	// port and address when it is in the server's network namespace,
	// else the host side of the Manager's forward into the command's
	// namespace, on the server's loopback.
	Port    int
	Address string // "0.0.0.0", "::", "127.0.0.1", …
	PID     int
	// InsidePort and InsideAddress are the socket's own port and address
	// when it is in a network namespace of the command's own (the network
	// off or allow-listed) and Port and Address are its forward; 0 and ""
	// in the server's namespace.
	InsidePort    int
	InsideAddress string
}

// PortEvent says a port of the command's tree started (Open) or stopped
// listening; every opened port gets its close, at the latest when the
// command ends. A forward opens before its Open event and is closed, its
// listener and connections, before its close event.
type PortEvent struct {
	Open bool
	Port
}

// listening is a listening socket a scan found: its own port and address
// and a process holding it, and the network namespace it is in with a
// process of the tree in that namespace.
type listening struct {
	Port
	// netns is the namespace's link, "net:[4026531840]"; nsPID is a
	// process in it.
	netns string
	nsPID int
}

// portKey identifies a listening socket across scans.
type portKey struct {
	port  int
	addr  string
	netns string
}

// watchPorts looks at the command's process tree for listening TCP
// sockets every portScanEvery until stop is closed, reporting each port
// once when it opens and once when it closes; at stop, whatever is still
// open is reported closed. A socket in a network namespace other than the
// server's is forwarded from a port on the server's loopback, which the
// events name; a socket that cannot be forwarded is not reported, and is
// tried again once it has stopped listening. The command's pumps group
// owns it, so the supervisor waits for it before the result is final; it
// owns the forwards, and closes them all before it returns.
func (c *Command) watchPorts(stop <-chan struct{}) {
	open := map[portKey]Port{}
	fw := newForwards(c.m.log.With("command", c.id))
	failed := map[portKey]struct{}{} // forwards that could not be made
	t := time.NewTicker(portScanEvery)
	defer t.Stop()
	closePort := func(k portKey, p Port) {
		delete(open, k)
		fw.stop(k)
		c.portChanged(PortEvent{Open: false, Port: p}, open)
	}
	var lr listenReader
	defer lr.close()
	scan := func(pids []int) {
		seen := map[portKey]listening{}
		for _, l := range listeners(pids, &lr) {
			seen[portKey{l.Port.Port, l.Address, l.netns}] = l
		}
		for k, p := range open {
			if _, ok := seen[k]; !ok {
				closePort(k, p)
			}
		}
		for k := range failed {
			if _, ok := seen[k]; !ok {
				delete(failed, k)
			}
		}
		for k, l := range seen {
			if _, ok := open[k]; ok {
				continue
			}
			if _, ok := failed[k]; ok {
				continue
			}
			p := l.Port
			if host := hostNetNS(); l.netns != "" && host != "" && l.netns != host {
				side, err := fw.start(k, l)
				if err != nil {
					failed[k] = struct{}{}
					c.m.log.Warn("a port the command listens on in its network namespace cannot be forwarded; it is not reported",
						"command", c.id, "port", l.Port.Port, "address", l.Address, "err", err)
					continue
				}
				p = Port{Port: int(side.Port()), Address: side.Addr().String(), PID: l.PID, InsidePort: l.Port.Port, InsideAddress: l.Address}
			}
			open[k] = p
			c.portChanged(PortEvent{Open: true, Port: p}, open)
		}
	}
	// The gate: while the listening sockets of the namespace of a process
	// of the tree (gateNS) are as they were at the last whole scan, nothing
	// in the tree can have started or stopped listening, but in another
	// namespace or by a socket handed out of the tree, which a whole scan
	// looks at every portFullScanEvery. A whole scan reads the fd table of
	// every process of the tree; the gate's fingerprint is one question to
	// the kernel about the namespace's listening sockets (shared by every
	// command in the server's own). A thousand handles running cost the
	// server half a core in whole scans.
	var (
		gateNS  string
		gatePID int // a process of the tree in gateNS, to enter it
		gateSum uint64
		gated   bool // gateSum is gateNS's fingerprint, taken before the last whole scan
		skipped int
	)
	for {
		select {
		case <-stop:
			for k, p := range open {
				closePort(k, p)
			}
			fw.close()
			return
		case <-t.C:
			if gated && skipped < portFullScanEvery-1 {
				if sum, ok := lr.fingerprint(gateNS, gatePID); ok && sum == gateSum {
					skipped++
					continue
				}
			}
			skipped = 0
			// The fingerprint is taken before the tree is read: a process
			// that listened before is in the tree read after it (or has
			// left it, which a whole scan finds); one that listens after
			// changes a later fingerprint. The first scan, and one that
			// finds the tree in another namespace, is not gated: the next
			// is whole again.
			sum, ok := lr.fingerprint(gateNS, gatePID)
			pids := c.treePids()
			ns, pid := "", 0
			if len(pids) > 0 {
				ns, pid = netnsOf(pids[0]), pids[0]
			}
			gated = ok && ns == gateNS
			gateNS, gatePID, gateSum = ns, pid, sum
			scan(pids)
		}
	}
}

// portChanged records the open ports for Snapshot and reports the change.
func (c *Command) portChanged(ev PortEvent, open map[portKey]Port) {
	ports := make([]Port, 0, len(open))
	for _, p := range open {
		ports = append(ports, p)
	}
	slices.SortFunc(ports, func(a, b Port) int { return a.Port - b.Port })
	c.mu.Lock()
	c.ports = ports
	c.mu.Unlock()
	if c.obs.OnPort != nil {
		c.emit(func() { c.obs.OnPort(ev) })
	}
}

// treePids returns the processes of the command: its cgroup's, else its
// live step processes and their descendants.
func (c *Command) treePids() []int {
	// cg is set before the watcher starts and cleared by end only after
	// the watcher has returned.
	cg := c.cg
	c.mu.Lock()
	mains := make([]int, 0, len(c.mains))
	for p := range c.mains {
		mains = append(mains, p)
	}
	c.mu.Unlock()
	if cg != nil {
		return cg.pids()
	}
	var out []int
	for _, p := range mains {
		out = append(out, p)
		out = subtree(p, out)
	}
	return out
}
