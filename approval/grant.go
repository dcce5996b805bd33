package approval

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// Grant is a remembered allow: it answers, without asking, every later
// request it covers.
type Grant struct {
	ID        string // "g-" + random hex
	Kind      Kind
	Target    string
	Scope     Scope  // Command, Session or Always; Once is never remembered
	HandleID  string // for Command scope
	Root      string // for Always scope
	CreatedAt time.Time
}

// covers reports whether g answers r: the same Kind and Target, byte for
// byte (a grant is exactly what was asked, never a pattern), and for
// Command scope the same handle. The Root of an Always grant is matched by
// whoever reads the Store for one root.
func (g Grant) covers(r Request) bool {
	if g.Kind != r.Kind || g.Target != r.Target {
		return false
	}
	switch g.Scope {
	case Command:
		return g.HandleID != "" && g.HandleID == r.HandleID
	case Session, Always:
		return true
	}
	return false
}

// same reports whether g and h allow the same thing, whatever their ids
// and times: one of them is enough.
func (g Grant) same(h Grant) bool {
	return g.Kind == h.Kind && g.Target == h.Target && g.Scope == h.Scope &&
		g.HandleID == h.HandleID && g.Root == h.Root
}

// outcome is the Outcome of r answered by g.
func (g Grant) outcome(r Request) Outcome {
	return Outcome{ID: g.ID, Kind: r.Kind, Target: r.Target, Allow: true, Scope: g.Scope, DecidedBy: ByGrant}
}

// newID returns prefix followed by 128 random bits in hex: unique and
// unguessable, so that neither a command nor a client can name an ask or
// a grant it was not told of.
func newID(prefix string) string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return prefix + hex.EncodeToString(b[:])
}
