package tools

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
)

// clientLog is a slog handler that passes every record to the server's log
// and sends those at Warn and above to the client as window/logMessage, so
// that what the user should see of the session's work (artifacts evicted
// over the cap, processes that survived SIGKILL) reaches the editor, not
// only the log file.
type clientLog struct {
	next  slog.Handler
	s     *rpc.Session
	attrs []slog.Attr
}

// newClientLog wraps the server's logger for one session.
func newClientLog(log *slog.Logger, s *rpc.Session) *slog.Logger {
	return slog.New(&clientLog{next: log.Handler(), s: s})
}

func (h *clientLog) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || h.next.Enabled(ctx, l)
}

func (h *clientLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		var b strings.Builder
		b.WriteString(r.Message)
		add := func(a slog.Attr) bool {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
			return true
		}
		for _, a := range h.attrs {
			add(a)
		}
		r.Attrs(add)
		typ := protocol.MessageWarning
		if r.Level >= slog.LevelError {
			typ = protocol.MessageError
		}
		h.s.LogMessage(typ, "%s", b.String())
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *clientLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &clientLog{next: h.next.WithAttrs(attrs), s: h.s, attrs: append(append([]slog.Attr{}, h.attrs...), attrs...)}
}

func (h *clientLog) WithGroup(name string) slog.Handler {
	return &clientLog{next: h.next.WithGroup(name), s: h.s, attrs: h.attrs}
}
