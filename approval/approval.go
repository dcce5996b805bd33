package approval

import (
	"context"
	"errors"
)

// Kind is what a confined command was refused, and is asked about.
type Kind string

const (
	// Network is a host:port the command's allow-list does not name;
	// Target is "host:port".
	Network Kind = "network"
	// Sandbox is a sandbox wider than the server allows; Target describes
	// the widening.
	Sandbox Kind = "sandbox"
)

// valid reports whether k is a Kind that can be asked about.
func (k Kind) valid() bool { return k == Network || k == Sandbox }

// Scope is how far an allow reaches.
type Scope string

const (
	// Once allows this connection, or this run, only; it is never
	// remembered.
	Once Scope = "once"
	// Command allows this command (handle) until it ends.
	Command Scope = "command"
	// Session allows the session, in memory (a persisted session keeps
	// its Broker across resumes).
	Session Scope = "session"
	// Always allows the root from now on, in the grants file (Store).
	Always Scope = "always"
)

// DecidedBy says who, or what, decided an ask.
type DecidedBy string

const (
	// ByUser is the user's answer.
	ByUser DecidedBy = "user"
	// ByTimeout is an ask nobody answered in time.
	ByTimeout DecidedBy = "timeout"
	// ByNoClient is an ask no client could put: no capability, or the
	// connection (or the command) ended.
	ByNoClient DecidedBy = "noClient"
	// ByPolicy is a deny without the user: --approvals deny, the pending
	// cap, or a bad answer.
	ByPolicy DecidedBy = "policy"
	// ByGrant is an allow by a remembered grant, without asking.
	ByGrant DecidedBy = "grant"
)

// Request is one ask as the user sees it.
type Request struct {
	ID            string // approvalId, made by the Broker (unique, unguessable: "a-" + random hex)
	HandleID      string // the command's handle, "" before it has one
	Argv          []string
	Cwd           string
	Kind          Kind
	Target        string
	Justification string
	Scopes        []Scope // the scopes offered: Once, Command (only with a HandleID), Session, Always (only with a Store)
}

// offers reports whether r offers s.
func (r Request) offers(s Scope) bool {
	for _, o := range r.Scopes {
		if o == s {
			return true
		}
	}
	return false
}

// Answer is the user's: allow or deny, and for an allow the scope, one of
// the Request's Scopes.
type Answer struct {
	Allow bool
	Scope Scope
}

// Asker puts a request to the user and waits for the answer (the
// session's client). An error is a deny: ErrNoClient when nobody can ask;
// any other error (the client's error answer, a bad answer) is a deny by
// policy. An Asker must return once ctx ends (the timeout, the callers
// gone, or the Broker closed); what it returns then is a deny.
type Asker func(ctx context.Context, r Request) (Answer, error)

// ErrNoClient is an Asker's error when no client can ask its user.
var ErrNoClient = errors.New("no client can ask its user")

// ErrUnknown is the error of a Revoke (or Store.Remove) of an id that
// names no remembered grant.
var ErrUnknown = errors.New("no such approval")

// Outcome is how one ask was decided, as a ToolResult's approvals list
// reports it.
type Outcome struct {
	ID        string // the approvalId asked, or the grant's id when a grant answered
	Kind      Kind
	Target    string
	Allow     bool
	Scope     Scope // of the allow (or of the grant); "" for a deny
	DecidedBy DecidedBy
	Reason    string // for a deny, what a refused command is told
}

// The reasons of the denies that have fixed words; a refused command is
// told them as they are.
const (
	ReasonUser       = "denied by the user"
	ReasonTimeout    = "no answer"
	ReasonNoClient   = "no client can ask"
	ReasonOff        = "approvals are off (--approvals deny)"
	ReasonPending    = "too many approvals pending"
	ReasonEnded      = "the command ended before an answer"
	reasonBadRequest = "not a request that can be asked"
)

// deny is the Outcome of a deny of r.
func deny(r Request, by DecidedBy, reason string) Outcome {
	return Outcome{ID: r.ID, Kind: r.Kind, Target: r.Target, DecidedBy: by, Reason: reason}
}
