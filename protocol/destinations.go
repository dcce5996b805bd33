package protocol

// DestinationsParams are the params of destinations: an empty object.
type DestinationsParams struct{}

// DestinationState is the state of a destination's transport.
type DestinationState string

// The states of a destination.
const (
	// DestinationIdle: not connected yet; the first request connects.
	DestinationIdle DestinationState = "idle"
	// DestinationConnecting: its command is starting and being initialized.
	DestinationConnecting DestinationState = "connecting"
	// DestinationReady: connected and initialized.
	DestinationReady DestinationState = "ready"
	// DestinationReconnecting: its transport dropped while its far
	// toolhost, run with --persist, holds the session: the command is
	// being started again (--destination-retry) to resume that session,
	// whose handles stay valid. Reason says why and which attempt runs.
	DestinationReconnecting DestinationState = "reconnecting"
	// DestinationLost: its transport died or could not start (Reason says
	// why); the next request to it connects again.
	DestinationLost DestinationState = "lost"
)

// DestinationInfo describes one destination.
type DestinationInfo struct {
	// Name is the name the command line gave it.
	Name string `json:"name"`
	// State is its transport's state.
	State DestinationState `json:"state"`
	// Command is the argv that reaches its toolhost.
	Command []string `json:"command"`
	// Root is its workspace root, once it has been initialized.
	Root string `json:"root,omitempty"`
	// ReadRoots are its read-only roots, once it has been initialized.
	ReadRoots []string `json:"readRoots,omitempty"`
	// ServerInfo names the toolhost that answered, once initialized.
	ServerInfo *ServerInfo `json:"serverInfo,omitempty"`
	// SessionID is the far session's id when the far toolhost persists it
	// (it answered capabilities.resume): the session a reconnection
	// resumes.
	SessionID string `json:"sessionId,omitempty"`
	// Reason says why it is lost or reconnecting: the transport's end and
	// the tail of its stderr, and the attempt under way.
	Reason string `json:"reason,omitempty"`
}

// DestinationList is the result of destinations.
type DestinationList []DestinationInfo
