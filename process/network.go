package process

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/toolhost/toolhost/netproxy"
)

// Defaults of ProxyLimits.
const (
	DefaultProxyIdleTimeout = 5 * time.Minute
	DefaultProxyMaxConns    = 256
)

// ProxyLimits tune the proxy of each step of a command with a network
// allow-list (Confinement.Network).
type ProxyLimits struct {
	// IdleTimeout ends a proxied connection that has moved no byte for
	// this long; 0 is DefaultProxyIdleTimeout, negative is none.
	IdleTimeout time.Duration
	// TotalTimeout ends a proxied connection this long after it was
	// accepted; 0 or negative is none (a long download must finish).
	TotalTimeout time.Duration
	// MaxConns caps the connections a step has through its proxy at
	// once; 0 is DefaultProxyMaxConns, negative is none.
	MaxConns int
}

// proxyConfig returns the configuration of a proxy for the next step of
// the command, nil without a network allow-list. Refusals are logged
// with the handle id (the command id when the command is not a handle
// yet) and the command id. With Confinement.NetworkAsk, the proxy's Ask
// calls it with the id the command has when it asks (proxyID): a command
// promoted while its step runs asks with its handle id from then on. It
// takes c.mu: call it before spawnStep does.
func (c *Command) proxyConfig() *netproxy.Config {
	cf := c.spec.Confine
	if cf == nil || cf.Network == nil {
		return nil
	}
	lim := cf.Proxy
	cfg := &netproxy.Config{
		Allow:        *cf.Network,
		ID:           c.proxyID(),
		Log:          c.m.log.With("command", c.id),
		IdleTimeout:  max(lim.IdleTimeout, 0),
		TotalTimeout: max(lim.TotalTimeout, 0),
		MaxConns:     max(lim.MaxConns, 0),
	}
	if lim.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultProxyIdleTimeout
	}
	if lim.MaxConns == 0 {
		cfg.MaxConns = DefaultProxyMaxConns
	}
	if ask := cf.NetworkAsk; ask != nil {
		cfg.Ask = func(ctx context.Context, host string, port int) netproxy.Verdict {
			return ask(ctx, c.proxyID(), host, port)
		}
	}
	return cfg
}

// proxyID returns the id the proxy's logs and asks name the command by:
// its handle id, or its command id while it has none. It takes c.mu,
// briefly: the proxy asks from its own goroutines, holding nothing of the
// command's.
func (c *Command) proxyID() string {
	if id := c.HandleID(); id != "" {
		return id
	}
	return c.id
}

// addStats adds one step's proxy counts to sum: connections, bytes and
// attempts of the same host and port are added up, and the lists stay
// sorted by host, then port.
func addStats(sum *netproxy.Stats, s netproxy.Stats) {
	if sum.Allowed == nil {
		sum.Allowed = []netproxy.AllowedStat{}
	}
	if sum.Denied == nil {
		sum.Denied = []netproxy.DeniedStat{}
	}
	for _, a := range s.Allowed {
		i, found := slices.BinarySearchFunc(sum.Allowed, a, func(x, y netproxy.AllowedStat) int {
			return cmp.Or(cmp.Compare(x.Host, y.Host), cmp.Compare(x.Port, y.Port))
		})
		if !found {
			sum.Allowed = slices.Insert(sum.Allowed, i, netproxy.AllowedStat{Host: a.Host, Port: a.Port})
		}
		sum.Allowed[i].Connections += a.Connections
		sum.Allowed[i].BytesOut += a.BytesOut
		sum.Allowed[i].BytesIn += a.BytesIn
	}
	for _, d := range s.Denied {
		i, found := slices.BinarySearchFunc(sum.Denied, d, func(x, y netproxy.DeniedStat) int {
			return cmp.Or(cmp.Compare(x.Host, y.Host), cmp.Compare(x.Port, y.Port))
		})
		if !found {
			sum.Denied = slices.Insert(sum.Denied, i, netproxy.DeniedStat{Host: d.Host, Port: d.Port})
		}
		sum.Denied[i].Attempts += d.Attempts
	}
	sum.OverLimit += s.OverLimit
}

// networkOf sums the proxy counts of procs: final for a step whose proxy
// has closed, so far for one still running. Nil without an allow-list.
func (c *Command) networkOf(procs []*proc) *netproxy.Stats {
	if cf := c.spec.Confine; cf == nil || cf.Network == nil {
		return nil
	}
	sum := &netproxy.Stats{Allowed: []netproxy.AllowedStat{}, Denied: []netproxy.DeniedStat{}}
	for _, p := range procs {
		if p.proxy != nil {
			addStats(sum, p.proxy.Stats())
		}
	}
	return sum
}

// networkAllow is the patterns of the command's network allow-list; nil
// without one.
func (c *Command) networkAllow() []string {
	if cf := c.spec.Confine; cf != nil && cf.Network != nil {
		return cf.Network.Patterns()
	}
	return nil
}
