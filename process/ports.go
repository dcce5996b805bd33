package process

import (
	"slices"
	"time"
)

// portScanEvery is how often a handle's process tree is looked at for
// listening sockets while it runs; nothing is scanned when no handle runs.
const portScanEvery = 200 * time.Millisecond

// Port is a TCP socket in LISTEN state held by a process of a command.
type Port struct {
	Port    int
	Address string // "0.0.0.0", "::", "127.0.0.1", …
	PID     int
}

// PortEvent says a port of the command's tree started (Open) or stopped
// listening; every opened port gets its close, at the latest when the
// command ends.
type PortEvent struct {
	Open bool
	Port
}

// portKey identifies a listening socket across scans.
type portKey struct {
	port int
	addr string
}

// watchPorts looks at the command's process tree for listening TCP
// sockets every portScanEvery until stop is closed, reporting each port
// once when it opens and once when it closes; at stop, whatever is still
// open is reported closed. The command's pumps group owns it, so the
// supervisor waits for it before the result is final.
func (c *Command) watchPorts(stop <-chan struct{}) {
	open := map[portKey]Port{}
	t := time.NewTicker(portScanEvery)
	defer t.Stop()
	scan := func() {
		seen := map[portKey]Port{}
		for _, p := range listeners(c.treePids()) {
			seen[portKey{p.Port, p.Address}] = p
		}
		for k, p := range open {
			if _, ok := seen[k]; !ok {
				delete(open, k)
				c.portChanged(PortEvent{Open: false, Port: p}, open)
			}
		}
		for k, p := range seen {
			if _, ok := open[k]; !ok {
				open[k] = p
				c.portChanged(PortEvent{Open: true, Port: p}, open)
			}
		}
	}
	for {
		select {
		case <-stop:
			for k, p := range open {
				delete(open, k)
				c.portChanged(PortEvent{Open: false, Port: p}, open)
			}
			return
		case <-t.C:
			scan()
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
