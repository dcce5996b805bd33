package protocol

import "time"

// ResumeOptions ask initialize to serve a session a server run with
// --persist still holds, instead of a new one (initializationOptions.resume).
type ResumeOptions struct {
	// SessionID is the session to resume, as an earlier initialize
	// answered it.
	SessionID string `json:"sessionId"`
	// LastSeq is the seq of the last toolResult the client has. Every
	// toolResult after it is sent again after the initialize answer, and
	// none before. Absent: every toolResult not yet written to a
	// connection.
	LastSeq *int64 `json:"lastSeq,omitempty"`
}

// SessionsParams are the params of sessions: an empty object.
type SessionsParams struct{}

// SessionInfo describes one session of this OS user for this root.
type SessionInfo struct {
	// SessionID names the session; initializationOptions.resume takes it.
	SessionID string `json:"sessionId"`
	// Root is the session's workspace root.
	Root string `json:"root"`
	// Attached says a connection serves the session now.
	Attached bool `json:"attached"`
	// CreatedAt is when the session's first initialize was answered.
	CreatedAt time.Time `json:"createdAt"`
	// LingerUntil is when a detached session ends, killing its commands,
	// unless a connection resumes it first; null while attached.
	LingerUntil *time.Time `json:"lingerUntil"`
	// Handles counts the session's handles still running.
	Handles int `json:"handles"`
}

// The reasons of a SessionNotFound (data.reason begins with one).
const (
	SessionUnknown   = "unknown"   // no session of this user and root has the id
	SessionExpired   = "expired"   // it was detached longer than --linger
	SessionEnded     = "ended"     // shutdown ended it
	SessionOtherUser = "otherUser" // another OS user holds it, or the place it is kept
	SessionNoPersist = "noPersist" // this server was not started with --persist
)

// SessionList is the result of sessions.
type SessionList []SessionInfo
