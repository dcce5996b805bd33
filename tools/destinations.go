package tools

import (
	"context"
	"encoding/json"

	"github.com/toolhost/toolhost/hub"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
)

// destinations lists the session's destinations and their states.
func (t *Tools) destinations(context.Context, *rpc.Session, *protocol.DestinationsParams) (*protocol.DestinationList, error) {
	l := protocol.DestinationList(t.hub.List())
	return &l, nil
}

// forward sends a request to a destination (to its connection epoch, or 0
// for the current one, connecting it if needed) and decodes its answer,
// its ids and artifact paths prefixed with the destination's name. A
// handle the answer names sends nothing before the answer is queued.
func forward[P, R any](ctx context.Context, s *rpc.Session, d *hub.Destination, epoch int, rt protocol.RequestType[P, R], p *P) (*R, error) {
	raw, err := d.Call(ctx, epoch, rt.Method(), p, func(announce func()) { s.AfterReply(ctx, announce) })
	if err != nil {
		return nil, err
	}
	return decodeForwarded[R](rt.Method(), d, raw)
}

// decodeForwarded decodes a destination's answer.
func decodeForwarded[R any](method string, d *hub.Destination, raw json.RawMessage) (*R, error) {
	var r R
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, protocol.NewError(protocol.CodeInternalError, &protocol.ErrorData{Method: method, Destination: d.Name(), Reason: err.Error()},
			"destination %q answered %s with a result that does not decode: %v", d.Name(), method, err)
	}
	return &r, nil
}

// destination returns the destination a request names, nil for none.
func (t *Tools) destination(name string) (*hub.Destination, error) {
	if name == "" {
		return nil, nil
	}
	return t.hub.Get(name)
}

// routeHandle returns where a handle id a destination handed out
// ("NAME/h-3") leads; a zero Target (Dest nil) for a handle of this
// server.
func (t *Tools) routeHandle(id string) (hub.Target, error) {
	tg, ok, err := t.hub.Route(id, "handleId")
	if !ok || err != nil {
		return hub.Target{}, err
	}
	return tg, nil
}
