package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// ProgressToken is an LSP progress token: a string or an integer.
//
//tsgen:type string | number
type ProgressToken struct {
	str   string
	num   int64
	isNum bool
}

// NewStringToken returns a string progress token.
func NewStringToken(s string) ProgressToken { return ProgressToken{str: s} }

// NewNumberToken returns an integer progress token.
func NewNumberToken(n int64) ProgressToken { return ProgressToken{num: n, isNum: true} }

// String returns the token for logs and map keys; number and string tokens
// never collide.
func (t ProgressToken) String() string {
	if t.isNum {
		return "n:" + strconv.FormatInt(t.num, 10)
	}
	return "s:" + t.str
}

// MarshalJSON encodes the token as a JSON string or number.
func (t ProgressToken) MarshalJSON() ([]byte, error) {
	if t.isNum {
		return strconv.AppendInt(nil, t.num, 10), nil
	}
	return json.Marshal(t.str)
}

// UnmarshalJSON decodes a JSON string or integer.
func (t *ProgressToken) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = NewStringToken(s)
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("progress token must be a string or an integer, not %s", b)
	}
	*t = NewNumberToken(n)
	return nil
}

// ProgressNotification are the params of $/progress.
type ProgressNotification struct {
	// Token is the request's workDoneToken, or the one the server created.
	Token ProgressToken `json:"token"`
	// Value is a [WorkDoneProgressBegin], [WorkDoneProgressReport] or
	// [WorkDoneProgressEnd].
	Value any `json:"value"`
}

// WorkDoneProgressBegin starts a progress.
type WorkDoneProgressBegin struct {
	Kind string `json:"kind"` // "begin"
	// Title is the longRunning's label, else the command as
	// LongRunningResult's command gives it.
	Title string `json:"title"`
	// Cancellable is true: window/workDoneProgress/cancel cancels the
	// command.
	Cancellable bool   `json:"cancellable"`
	Message     string `json:"message,omitempty"`
	Percentage  *int   `json:"percentage,omitempty"`
}

// WorkDoneProgressReport reports on a progress: one per step transition.
type WorkDoneProgressReport struct {
	Kind        string `json:"kind"` // "report"
	Cancellable bool   `json:"cancellable"`
	// Message is "step 2/5: build" when a step starts and "step 2/5: build
	// (done)", "(fail)" or "(skip)" when it ends; "step 2: build" without a
	// total, "build" without an index.
	Message string `json:"message,omitempty"`
	// Percentage is the share of steps finished, when the total is known:
	// (index-1)*100/total at a start, index*100/total at an end.
	Percentage *int `json:"percentage,omitempty"`
}

// WorkDoneProgressEnd ends a progress, exactly once, whatever ended the
// command.
type WorkDoneProgressEnd struct {
	Kind string `json:"kind"` // "end"
	// Message is "completed (exit 3)", "cancelled" or "timedOut".
	Message string `json:"message,omitempty"`
}

// WorkDoneProgressCreateParams are the params of
// window/workDoneProgress/create.
type WorkDoneProgressCreateParams struct {
	// Token is the token to create: "toolhost/" and the handle's id.
	Token ProgressToken `json:"token"`
}

// WorkDoneProgressCancelParams are the params of
// window/workDoneProgress/cancel.
type WorkDoneProgressCancelParams struct {
	// Token is the token of the progress to cancel.
	Token ProgressToken `json:"token"`
}
