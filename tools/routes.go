package tools

import (
	"context"
	"time"

	"github.com/toolhost/toolhost/hub"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
)

// handler is a method's handler, as rpc.Handle takes it.
type handler[P, R any] func(ctx context.Context, s *rpc.Session, p *P) (*R, error)

// orderedHandler is a method's handler in two parts, as rpc.HandleOrdered
// takes it.
type orderedHandler[P, R any] func(ctx context.Context, s *rpc.Session, p *P) (*R, func(context.Context) (*R, error), error)

// A route says where a request goes: to tg.Dest, on its connection
// tg.Epoch (0: the current one, connecting it if needed), with q the
// params as the destination is to see them; or, tg.Dest nil, here. An
// error is the request's answer.
type route[P any] func(ctx context.Context, p *P) (tg hub.Target, q *P, err error)

// forwarded is the handler of a method whose requests may be a
// destination's: a request to routes to a destination is forwarded there
// (detached: it waits, computing nothing) and answered with the
// destination's answer; here serves the others.
func forwarded[P, R any](rt protocol.RequestType[P, R], to route[P], here handler[P, R]) handler[P, R] {
	return func(ctx context.Context, s *rpc.Session, p *P) (*R, error) {
		tg, q, err := to(ctx, p)
		if err != nil {
			return nil, err
		}
		if tg.Dest == nil {
			return here(ctx, s, p)
		}
		s.Detach(ctx)
		return forward(ctx, s, tg.Dest, tg.Epoch, rt, q)
	}
}

// forwardedLater is forwarded for a handler in two parts
// (rpc.HandleOrdered): it routes and writes the request to the
// destination in the first part, in the wire order, so that it reaches
// the far side before the requests that follow it (a resize before the
// input meant for the new size, as writeInput's own forwarding keeps
// them), and awaits the answer in the rest.
func forwardedLater[P, R any](rt protocol.RequestType[P, R], to route[P], here orderedHandler[P, R]) orderedHandler[P, R] {
	return func(ctx context.Context, s *rpc.Session, p *P) (*R, func(context.Context) (*R, error), error) {
		tg, q, err := to(ctx, p)
		if err != nil {
			return nil, nil, err
		}
		if tg.Dest == nil {
			return here(ctx, s, p)
		}
		if tg.Epoch == 0 {
			// To a destination by name, which may have to connect first:
			// nothing before it on that connection is waited for.
			return nil, func(ctx context.Context) (*R, error) { return forward(ctx, s, tg.Dest, tg.Epoch, rt, q) }, nil
		}
		d := tg.Dest
		wait, err := d.Send(ctx, tg.Epoch, rt.Method(), q)
		if err != nil {
			return nil, nil, err
		}
		return nil, func(ctx context.Context) (*R, error) {
			raw, err := wait(ctx)
			if err != nil {
				return nil, err
			}
			return decodeForwarded[R](rt.Method(), d, raw)
		}, nil
	}
}

// byDestination routes a request by the destination it names (*dest(p);
// "" is here). The forwarded params name none.
func byDestination[P any](t *Tools, dest func(*P) *string) route[P] {
	return func(_ context.Context, p *P) (hub.Target, *P, error) {
		d, err := t.destination(*dest(p))
		if d == nil || err != nil {
			return hub.Target{}, nil, err
		}
		q := *p
		*dest(&q) = ""
		return hub.Target{Dest: d}, &q, nil
	}
}

// byHandle routes a request about a handle by the destination that handed
// its id (*id(p)) out ("NAME/h-3", or "NAME#2/h-3" from its second
// connection), to the connection that did. The forwarded params give the
// handle's id there.
func byHandle[P any](t *Tools, id func(*P) *string) route[P] {
	return func(_ context.Context, p *P) (hub.Target, *P, error) {
		tg, err := t.routeHandle(*id(p))
		if tg.Dest == nil || err != nil {
			return hub.Target{}, nil, err
		}
		q := *p
		*id(&q) = tg.Far
		return tg, &q, nil
	}
}

// bySnapshot routes a request about a snapshot by the destination that
// took it (*id(p) is "NAME/ID"), to the destination's current session: a
// snapshot outlives the far session that took it. The forwarded params
// give the snapshot's id there and name no destination (*dest).
func bySnapshot[P any](t *Tools, id, dest func(*P) *string) route[P] {
	return func(_ context.Context, p *P) (hub.Target, *P, error) {
		tg, err := t.routeSnapshot(*id(p), "snapshotId")
		if tg.Dest == nil || err != nil {
			return hub.Target{}, nil, err
		}
		q := *p
		*id(&q), *dest(&q) = tg.Far, ""
		return hub.Target{Dest: tg.Dest}, &q, nil
	}
}

// The fields the routes read and rewrite.
func runCommandDest(p *protocol.RunCommandParams) *string   { return &p.Destination }
func longRunningDest(p *protocol.LongRunningParams) *string { return &p.Destination }
func writeFileDest(p *protocol.WriteFileParams) *string     { return &p.Destination }
func snapshotDest(p *protocol.SnapshotParams) *string       { return &p.Destination }
func snapshotsDest(p *protocol.SnapshotsParams) *string     { return &p.Destination }
func restoreDest(p *protocol.RestoreParams) *string         { return &p.Destination }
func restoreID(p *protocol.RestoreParams) *string           { return &p.SnapshotID }
func diffDest(p *protocol.DiffParams) *string               { return &p.Destination }
func dropDest(p *protocol.DropSnapshotParams) *string       { return &p.Destination }
func dropID(p *protocol.DropSnapshotParams) *string         { return &p.SnapshotID }
func exportDest(p *protocol.ExportSnapshotParams) *string   { return &p.Destination }
func exportID(p *protocol.ExportSnapshotParams) *string     { return &p.SnapshotID }
func readFileDest(p *protocol.ReadFileParams) *string       { return &p.Destination }
func waitHandle(p *protocol.WaitParams) *string             { return &p.HandleID }
func readOutputHandle(p *protocol.ReadOutputParams) *string { return &p.HandleID }
func cancelHandle(p *protocol.CancelParams) *string         { return &p.HandleID }
func resizeHandle(p *protocol.ResizeParams) *string         { return &p.HandleID }
func signalHandle(p *protocol.SignalParams) *string         { return &p.HandleID }
func progressHandle(p *protocol.ProgressParams) *string     { return &p.HandleID }
func progressDest(p *protocol.ProgressParams) *string       { return &p.Destination }

// routeRunCommand routes a runCommand by its destination. A forwarded
// yieldMs is what is left of it: the far side counts from its own
// arrival.
func (t *Tools) routeRunCommand(ctx context.Context, p *protocol.RunCommandParams) (hub.Target, *protocol.RunCommandParams, error) {
	tg, q, err := byDestination(t, runCommandDest)(ctx, p)
	if tg.Dest != nil && p.YieldMs != nil {
		left := max(0, *p.YieldMs-time.Since(arrival(ctx)).Milliseconds())
		q.YieldMs = &left
	}
	return tg, q, err
}

// routeRestore routes a restore by its snapshot, then by its destination.
// One without a snapshotId stays here, to be refused.
func (t *Tools) routeRestore(ctx context.Context, p *protocol.RestoreParams) (hub.Target, *protocol.RestoreParams, error) {
	if p.SnapshotID == "" {
		return hub.Target{}, nil, nil
	}
	if tg, q, err := bySnapshot(t, restoreID, restoreDest)(ctx, p); tg.Dest != nil || err != nil {
		return tg, q, err
	}
	return byDestination(t, restoreDest)(ctx, p)
}

// routeDiff routes a diff by its from snapshot (to, if given, must be of
// the same destination), then by its destination. One without from stays
// here, to be refused.
func (t *Tools) routeDiff(ctx context.Context, p *protocol.DiffParams) (hub.Target, *protocol.DiffParams, error) {
	if p.From == "" {
		return hub.Target{}, nil, nil
	}
	tg, err := t.routeSnapshot(p.From, "from")
	if err != nil {
		return hub.Target{}, nil, err
	}
	if tg.Dest == nil {
		return byDestination(t, diffDest)(ctx, p)
	}
	q := *p
	q.From, q.Destination = tg.Far, ""
	if q.To != "" {
		to, err := t.routeSnapshot(q.To, "to")
		if err != nil {
			return hub.Target{}, nil, err
		}
		if to.Dest != tg.Dest {
			return hub.Target{}, nil, protocol.InvalidParams("to", "from and to must be snapshots of one root")
		}
		q.To = to.Far
	}
	return hub.Target{Dest: tg.Dest}, &q, nil
}

// routeReadFile routes a readFile by its destination, else by its path: a
// destination's, as its answers name it ("NAME//abs/path"), goes to the
// connection that named it.
func (t *Tools) routeReadFile(ctx context.Context, p *protocol.ReadFileParams) (hub.Target, *protocol.ReadFileParams, error) {
	if tg, q, err := byDestination(t, readFileDest)(ctx, p); tg.Dest != nil || err != nil {
		return tg, q, err
	}
	tg, _, err := t.hub.RoutePath(p.Path)
	if tg.Dest == nil || err != nil {
		return hub.Target{}, nil, err
	}
	q := *p
	q.Path = tg.Far
	return tg, &q, nil
}

// routeProgress routes a progress by its handle; one about every handle
// by its destination.
func (t *Tools) routeProgress(ctx context.Context, p *protocol.ProgressParams) (hub.Target, *protocol.ProgressParams, error) {
	if p.HandleID == "" {
		return byDestination(t, progressDest)(ctx, p)
	}
	tg, q, err := byHandle(t, progressHandle)(ctx, p)
	if tg.Dest != nil {
		q.Destination = ""
	}
	return tg, q, err
}
