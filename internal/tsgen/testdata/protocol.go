// Package fixture is a stand-in for the protocol package: it uses every shape the
// generator maps.
package fixture

import (
	"encoding/json"
	"time"
)

//go:generate go run ../internal/tsgen -out ../editor-extension/src/protocol.ts

// Method names.
const (
	MethodRunCommand  = "runCommand"
	MethodLongRunning = "longRunning"
	// NotifyProgress is LSP's work-done progress.
	NotifyProgress = "$/progress"
)

// Status is how a command ended.
type Status string

const (
	// StatusCompleted: the command exited by itself.
	StatusCompleted Status = "completed"
	StatusTimedOut  Status = "timedOut"
	StatusCancelled Status = "cancelled"
)

// StepStatus is a step's state in a stepTransition.
type StepStatus string

const (
	StepStart StepStatus = "start"
	StepDone  StepStatus = "done"
)

// Env maps variable names to values; null unsets.
type Env map[string]*string

// RunCommandParams are runCommand's params.
type RunCommandParams struct {
	// Argv is the command line, never run through a shell.
	Argv []string `json:"argv"`
	// Cwd is where it runs. Default: the root.
	Cwd       string          `json:"cwd"`
	Env       Env             `json:"env,omitempty"`
	TimeoutMs *int64          `json:"timeoutMs,omitempty"`
	Limit     *int            `json:"limit"` // nullable, not omitted
	Token     json.RawMessage `json:"workDoneToken,omitempty"`
	internal  string
	Ignored   string `json:"-"`
}

// Step is one step of a recipe.
type Step struct {
	Name            string            `json:"name"`
	Argv            []string          `json:"argv"`
	Env             map[string]string `json:"env,omitempty"`
	ContinueOnError bool              `json:"continueOnError,omitzero"`
}

// LongRunningParams adds a label and steps to runCommand's params.
type LongRunningParams struct {
	RunCommandParams
	Label string  `json:"label,omitempty"`
	Steps []*Step `json:"steps,omitempty"`
}

// ToolResult is what a command left.
//
// It is sent once per handle.
type ToolResult struct {
	CommandID string        `json:"commandId"`
	Status    Status        `json:"status"`
	StartedAt time.Time     `json:"startedAt"`
	Duration  time.Duration `json:"durationNs"`
	Data      []byte        `json:"data,omitempty"`
	Extra     any           `json:"extra,omitempty"`
	Matrix    [][]int       `json:"matrix"`
	Statuses  []Status      `json:"statuses"`
	Artifacts struct {
		OutputPath string `json:"outputPath"`
		ByteCount  int64  `json:"byteCount"`
	} `json:"artifacts"`
	Size    int64 `json:"size,string"`
	NoTag   bool
	Handles map[string][]*Progress `json:"handles,omitempty"`
}

// Progress is a handle's state.
type Progress struct {
	HandleID string `json:"handleId"`
	// Status is "running", then how it ended. When Status says it ended,
	// HandleID no longer runs a *process* <ever>: see [ToolResult] and
	// `a|b`.
	Status string `json:"status"`
}

type unexported struct{ A int }

// ID is a request id.
type ID = string

// Token is a string or an integer on the wire.
//
//tsgen:type string | number
type Token struct{ s string }

// MarshalJSON writes the token.
func (t Token) MarshalJSON() ([]byte, error) { return nil, nil }

// Opaque has its own JSON and no directive.
type Opaque struct{ x int }

// MarshalJSON writes it.
func (o *Opaque) MarshalJSON() ([]byte, error) { return nil, nil }

// Kind is an int enum.
type Kind int

// The kinds.
const (
	KindA Kind = 1
	KindB Kind = 2
)

// UsesThem refers to the types above.
type UsesThem struct {
	Token  Token  `json:"token"`
	Opaque Opaque `json:"opaque"`
	Kind   Kind   `json:"kind"`
}
