package persist

import "encoding/json"

// wireVersion is the version of what a front and its holder say over the
// socket; a holder refuses another.
const wireVersion = 1

// hello is what a front sends its holder first, with its stdin, stdout
// and stderr as SCM_RIGHTS.
type hello struct {
	V int `json:"v"`
	// Build names the front's toolhost build; a holder serves only its
	// own.
	Build string `json:"build"`
	// Args, Env and Cwd are the front's command line (without the
	// program), environment and working directory: the session's
	// configuration, as if the front served it.
	Args []string `json:"args"`
	Env  []string `json:"env"`
	Cwd  string   `json:"cwd"`
	// Prefix are the bytes the front read from stdin before it handed
	// stdin over: they come first.
	Prefix []byte `json:"prefix,omitempty"`
	// Mode is the protocol the client speaks: "" for toolhost's own,
	// ModeMCP for the Model Context Protocol.
	Mode string `json:"mode,omitempty"`
	// HTTP are the HTTP flags of an MCP front of `toolhost mcp --persist
	// --http` (its other flags are Args): the holder serves the shared
	// server of Args over HTTP, and the front only waits.
	HTTP []string `json:"http,omitempty"`
}

// verdict is what a holder answers a front, once: the exit code of the
// connection that ended, or why it was refused.
type verdict struct {
	Exit  int    `json:"exit"`
	Error string `json:"error,omitempty"`
}

func (h *hello) encode() ([]byte, error) { return json.Marshal(h) }
