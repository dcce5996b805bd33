package rpc

import (
	"context"
	"encoding/json"
	"slices"
)

// Handler serves one request. It returns the result to send, or an error:
// an *Error goes out with its code and data, anything else as -32603. ctx is
// cancelled by $/cancelRequest and at the session's end.
type Handler func(ctx context.Context, s *Session, params json.RawMessage) (any, error)

// NotificationHandler handles one notification from the client.
type NotificationHandler func(ctx context.Context, s *Session, params json.RawMessage)

// Table is the method table: the requests and notifications the tools serve,
// and the notifications they may send. Tools register into it before the
// server starts; it is read-only afterwards.
type Table struct {
	methods       map[string]Handler
	inline        map[string]bool // methods that never block: served on the read loop
	notifications map[string]NotificationHandler
	sends         []string // notifications the tools may send
	requests      []string // requests the tools may send the client
}

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{methods: make(map[string]Handler), inline: make(map[string]bool), notifications: make(map[string]NotificationHandler)}
}

// Handle registers the handler of a request method.
func (t *Table) Handle(method string, h Handler) { t.methods[method] = h }

// HandleInline registers the handler of a request method that never
// blocks and answers in microseconds (a snapshot under a lock): it runs on
// the read loop, without the goroutine handoff a concurrent request costs,
// so requests after it wait that long.
func (t *Table) HandleInline(method string, h Handler) {
	t.methods[method] = h
	t.inline[method] = true
}

// HandleNotification registers the handler of a client notification.
func (t *Table) HandleNotification(method string, h NotificationHandler) {
	t.notifications[method] = h
}

// Sends records notifications the tools may send, for capabilities.
func (t *Table) Sends(methods ...string) {
	for _, m := range methods {
		if !slices.Contains(t.sends, m) {
			t.sends = append(t.sends, m)
		}
	}
}

// SendsRequests records requests the tools may send the client, for
// capabilities.
func (t *Table) SendsRequests(methods ...string) {
	for _, m := range methods {
		if !slices.Contains(t.requests, m) {
			t.requests = append(t.requests, m)
		}
	}
}

// methodNames returns every request method served, lifecycle included,
// sorted.
func (t *Table) methodNames() []string {
	names := []string{MethodInitialize, MethodShutdown}
	for m := range t.methods {
		names = append(names, m)
	}
	slices.Sort(names)
	return names
}

// sentNames returns the notifications the server may send, sorted.
func (t *Table) sentNames() []string {
	names := slices.Clone(t.sends)
	if !slices.Contains(names, NotifyLogMessage) {
		names = append(names, NotifyLogMessage)
	}
	slices.Sort(names)
	return names
}
