package tools

import (
	"context"
	"encoding/json"

	"github.com/toolhost/toolhost/hub"
	"github.com/toolhost/toolhost/rpc"
)

// destinations lists the session's destinations and their states.
func (t *Tools) destinations(context.Context, *rpc.Session, *rpc.DestinationsParams) (*rpc.DestinationList, error) {
	l := rpc.DestinationList(t.hub.List())
	return &l, nil
}

// forward sends a request to a destination and decodes its answer, its
// ids and artifact paths prefixed with the destination's name. A handle
// the answer names sends nothing before the answer is queued.
func forward[P, R any](ctx context.Context, s *rpc.Session, d *hub.Destination, rt rpc.RequestType[P, R], p *P) (*R, error) {
	raw, err := d.Call(ctx, rt.Method(), p, func(announce func()) { s.AfterReply(ctx, announce) })
	if err != nil {
		return nil, err
	}
	return decodeForwarded[R](rt.Method(), d, raw)
}

// decodeForwarded decodes a destination's answer.
func decodeForwarded[R any](method string, d *hub.Destination, raw json.RawMessage) (*R, error) {
	var r R
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, rpc.NewError(rpc.CodeInternalError, &rpc.ErrorData{Method: method, Destination: d.Name(), Reason: err.Error()},
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

// routeHandle returns the destination of a handle id it handed out
// ("NAME/h-3") and the id there; nil for a handle of this server.
func (t *Tools) routeHandle(id string) (*hub.Destination, string, error) {
	d, far, ok, err := t.hub.Route(id)
	if !ok || err != nil {
		return nil, "", err
	}
	return d, far, nil
}

// farPath names a destination's absolute path as its artifact paths are
// named: "NAME/" and the path ("NAME//srv/ws/x"), which readFile routes
// back there.
func farPath(d *hub.Destination, path string) string {
	if path == "" {
		return ""
	}
	return d.Name() + "/" + path
}
