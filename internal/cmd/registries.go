package cmd

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/toolhost/toolhost/netproxy"
)

// registriesTimeout bounds the reading of the registries' configuration:
// a tool that hangs longer gives nothing.
const registriesTimeout = 30 * time.Second

// registries reads, once per process and in the background, the hosts
// the machine's Go, npm and pip are configured to use
// (--network-allow-registries), so that no session waits for npm unless
// it needs the list before it is read. A process that serves one session
// starts it at once; a holder, at its first session that needs it.
type registries struct {
	log  *slog.Logger
	once sync.Once
	r    *registryRead // set by the first start
}

// start starts the reading, once, and returns it.
func (g *registries) start() *registryRead {
	g.once.Do(func() { g.r = readRegistries(g.log) })
	return g.r
}

// stop ends the reading, if it started, and waits for it.
func (g *registries) stop() {
	g.once.Do(func() {})
	if g.r != nil {
		g.r.cancel()
		<-g.r.done
	}
}

// registryRead is one reading of the registries' hosts.
type registryRead struct {
	cancel context.CancelFunc
	// done is closed once patterns is set; patterns is written before,
	// and only read after.
	done     chan struct{}
	patterns []string
}

// readRegistries starts reading the registries.
func readRegistries(log *slog.Logger) *registryRead {
	ctx, cancel := context.WithTimeout(context.Background(), registriesTimeout)
	r := &registryRead{cancel: cancel, done: make(chan struct{})}
	go func() { // owned by the registries that started it: stop waits on done
		defer close(r.done)
		r.patterns = []string{} // read: not nil, even when no tool gave a host
		rules, found := netproxy.Registries(ctx)
		for _, s := range found {
			if s.Note != "" {
				log.Info("network allow-list: a registry gave no host", "tool", s.Tool, "setting", s.Setting, "value", s.Value, "note", s.Note)
				continue
			}
			log.Info("network allow-list: added a registry's host", "tool", s.Tool, "setting", s.Setting, "value", s.Value, "entry", s.Rule.String())
		}
		for _, rule := range rules {
			r.patterns = append(r.patterns, rule.String())
		}
	}()
	return r
}

// wait returns the registries' allow-list entries once read (not nil), or
// nil if ctx ends first.
func (r *registryRead) wait(ctx context.Context) []string {
	select {
	case <-r.done:
		return r.patterns
	case <-ctx.Done():
		return nil
	}
}
