package hub

import (
	"testing"

	"github.com/toolhost/toolhost/protocol"
)

func TestRoute(t *testing.T) {
	h := New([]Spec{{Name: "far", Argv: []string{"toolhost"}}, {Name: "b", Argv: []string{"toolhost"}}}, Options{})
	if err := h.Configure(nil, rpcCaps(), nil, []string{"far"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id    string
		ok    bool
		bad   bool
		far   string
		epoch int
	}{
		{id: "h-3"},
		{id: "far/h-3", ok: true, far: "h-3", epoch: 1},
		{id: "far#2/h-3", ok: true, far: "h-3", epoch: 2},
		{id: "far#1/h-3", ok: true, bad: true}, // the first connection has no #
		{id: "far#x/h-3", ok: true, bad: true},
		{id: "far/", ok: true, bad: true},
		{id: "b/h-1", ok: true, bad: true}, // narrowed away
		{id: "zzz/h-1", ok: true, bad: true},
	} {
		tg, ok, err := h.Route(c.id, "handleId")
		if ok != c.ok || (err != nil) != c.bad {
			t.Errorf("Route(%q) = ok %v, err %v; want ok %v, error %v", c.id, ok, err, c.ok, c.bad)
			continue
		}
		if c.ok && !c.bad && (tg.Far != c.far || tg.Epoch != c.epoch || tg.Dest.Name() != "far") {
			t.Errorf("Route(%q) = %+v, want far %q epoch %d", c.id, tg, c.far, c.epoch)
		}
	}
	if tg, ok, err := h.RoutePath("far#3//tmp/a/stdout.log"); !ok || err != nil || tg.Far != "/tmp/a/stdout.log" || tg.Epoch != 3 {
		t.Errorf("RoutePath = %+v %v %v", tg, ok, err)
	}
	if _, ok, _ := h.RoutePath("notes//x"); ok {
		t.Error("RoutePath took a local path with a double slash for a destination's")
	}
}

func rpcCaps() protocol.ClientCapabilities { return protocol.ClientCapabilities{} }
