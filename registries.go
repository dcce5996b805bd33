package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/toolhost/toolhost/netproxy"
)

// registriesTimeout bounds the reading of the registries' configuration:
// a tool that hangs longer gives nothing.
const registriesTimeout = 30 * time.Second

// registries reads, once and in the background from the server's start,
// the hosts the machine's Go, npm and pip are configured to use
// (--network-allow-registries), so that no session waits for npm unless
// it needs the list before it is read.
type registries struct {
	cancel context.CancelFunc
	// done is closed once patterns is set; patterns is written before,
	// and only read after.
	done     chan struct{}
	patterns []string
}

// startRegistries starts reading the registries; stop ends the reading
// and waits for it.
func startRegistries(log *slog.Logger) *registries {
	ctx, cancel := context.WithTimeout(context.Background(), registriesTimeout)
	r := &registries{cancel: cancel, done: make(chan struct{})}
	go func() { // owned by r: stop waits on done
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
func (r *registries) wait(ctx context.Context) []string {
	select {
	case <-r.done:
		return r.patterns
	case <-ctx.Done():
		return nil
	}
}

// stop cancels the reading and waits for it.
func (r *registries) stop() {
	r.cancel()
	<-r.done
}
