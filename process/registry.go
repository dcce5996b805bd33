package process

import (
	"sort"
	"sync"
)

// registry keeps the handles of longRunning commands: running ones, and
// the most recent finished ones so their results stay queryable.
type registry struct {
	// max bounds recent; it is set once, before use.
	max int

	mu sync.Mutex // guards running and recent
	// running holds handles whose command has not finished, by handle id.
	running map[string]*Command
	// recent holds finished handles, oldest first; len(recent) <= max.
	recent []*Command
}

func newRegistry(max int) *registry {
	return &registry{max: max, running: make(map[string]*Command)}
}

// add registers a started handle.
func (r *registry) add(c *Command) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running[c.handleID] = c
}

// finish moves c to the recent list, dropping the oldest beyond max.
func (r *registry) finish(c *Command) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.running[c.handleID]; !ok {
		return
	}
	delete(r.running, c.handleID)
	r.recent = append(r.recent, c)
	if over := len(r.recent) - r.max; over > 0 {
		clear(r.recent[:over])
		r.recent = append(r.recent[:0], r.recent[over:]...)
	}
}

// lookup finds a running or recent handle.
func (r *registry) lookup(id string) (*Command, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.running[id]; ok {
		return c, true
	}
	for _, c := range r.recent {
		if c.handleID == id {
			return c, true
		}
	}
	return nil, false
}

// list returns running and recent handles by start time (then id).
func (r *registry) list() []*Command {
	r.mu.Lock()
	out := make([]*Command, 0, len(r.running)+len(r.recent))
	for _, c := range r.running {
		out = append(out, c)
	}
	out = append(out, r.recent...)
	r.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].startedAt.Equal(out[j].startedAt) {
			return out[i].startedAt.Before(out[j].startedAt)
		}
		return out[i].seq < out[j].seq
	})
	return out
}
