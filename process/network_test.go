package process

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/netproxy"
)

// serveHTTPHelper is the helper mode "serve-http": a dev server. It
// listens on 127.0.0.1 (a port the kernel chooses), answers every request
// "hello from inside", says "listening PORT", and reads its stdin: "stop"
// closes the listener and says "stopped"; the end of stdin ends it.
func serveHTTPHelper() {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(2)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hello from inside\n")
	})}
	go func() { _ = srv.Serve(l) }() // ends with the process, or at "stop"
	fmt.Println("listening", l.Addr().(*net.TCPAddr).Port)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "stop" {
			_ = srv.Close()
			fmt.Println("stopped")
		}
	}
}

// TestAddStats checks that a recipe's proxy counts add up by host and
// port, sorted.
func TestAddStats(t *testing.T) {
	var sum netproxy.Stats
	addStats(&sum, netproxy.Stats{
		Allowed: []netproxy.AllowedStat{{Host: "b.example", Port: 443, Connections: 1, BytesOut: 10, BytesIn: 100}},
		Denied:  []netproxy.DeniedStat{{Host: "evil.example", Port: 443, Attempts: 2}},
	})
	addStats(&sum, netproxy.Stats{
		Allowed: []netproxy.AllowedStat{
			{Host: "a.example", Port: 443, Connections: 1, BytesOut: 1, BytesIn: 2},
			{Host: "b.example", Port: 80, Connections: 1, BytesOut: 3, BytesIn: 4},
			{Host: "b.example", Port: 443, Connections: 2, BytesOut: 5, BytesIn: 6},
		},
		Denied:    []netproxy.DeniedStat{{Host: "evil.example", Port: 443, Attempts: 1}, {Host: "10.0.0.1", Port: 22, Attempts: 1}},
		OverLimit: 3,
	})
	want := netproxy.Stats{
		Allowed: []netproxy.AllowedStat{
			{Host: "a.example", Port: 443, Connections: 1, BytesOut: 1, BytesIn: 2},
			{Host: "b.example", Port: 80, Connections: 1, BytesOut: 3, BytesIn: 4},
			{Host: "b.example", Port: 443, Connections: 3, BytesOut: 15, BytesIn: 106},
		},
		Denied:    []netproxy.DeniedStat{{Host: "10.0.0.1", Port: 22, Attempts: 1}, {Host: "evil.example", Port: 443, Attempts: 3}},
		OverLimit: 3,
	}
	if diff := cmp.Diff(want, sum); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

// TestInsideTarget checks where a forward connects for each kind of
// listening address.
func TestInsideTarget(t *testing.T) {
	for _, tc := range []struct{ addr, network, target string }{
		{"0.0.0.0", "tcp4", "127.0.0.1:3000"},
		{"127.0.0.1", "tcp4", "127.0.0.1:3000"},
		{"127.0.0.53", "tcp4", "127.0.0.53:3000"},
		{"::", "tcp6", "[::1]:3000"},
		{"::1", "tcp6", "[::1]:3000"},
	} {
		network, target := insideTarget(tc.addr, 3000)
		if network != tc.network || target != tc.target {
			t.Errorf("insideTarget(%q) = %s %s, want %s %s", tc.addr, network, target, tc.network, tc.target)
		}
	}
}

// TestProxyConfigAsk checks that proxyConfig gives the proxy an Ask only
// with Confinement.NetworkAsk, and that it calls NetworkAsk with the
// command's id as it is when it asks: the command id before the command
// is a handle, the handle id after; the context, host, port and the
// answer pass through as they are.
func TestProxyConfigAsk(t *testing.T) {
	type call struct {
		id, host string
		port     int
		ctx      context.Context
	}
	var calls []call
	ask := func(ctx context.Context, id, host string, port int) netproxy.Verdict {
		calls = append(calls, call{id, host, port, ctx})
		return netproxy.Verdict{Reason: "denied by the user"}
	}
	allow, err := netproxy.ParseAllowList("example.com")
	if err != nil {
		t.Fatal(err)
	}
	m := newTestManager(t, Config{})
	c := &Command{m: m, seq: 7, id: "c-7", spec: Spec{Confine: &Confinement{Network: &allow}}}
	if cfg := c.proxyConfig(); cfg == nil || cfg.Ask != nil {
		t.Fatalf("without NetworkAsk: config %+v, want one without Ask", cfg)
	}
	c.spec.Confine.NetworkAsk = ask
	cfg := c.proxyConfig()
	if cfg == nil || cfg.Ask == nil || cfg.ID != "c-7" {
		t.Fatalf("with NetworkAsk: config %+v, want an Ask and the command id", cfg)
	}
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "the proxy's")
	if v := cfg.Ask(ctx, "elsewhere.example", 8443); v != (netproxy.Verdict{Reason: "denied by the user"}) {
		t.Errorf("Ask = %+v, want NetworkAsk's answer", v)
	}
	c.mu.Lock()
	c.handleID = "h-7" // as Promote sets it while the step runs
	c.mu.Unlock()
	cfg.Ask(ctx, "10.0.0.1", 22)
	if len(calls) != 2 || calls[0].ctx.Value(key{}) != "the proxy's" || calls[1].ctx.Value(key{}) != "the proxy's" {
		t.Fatalf("calls %+v, want two with the proxy's context", calls)
	}
	got := []string{fmt.Sprint(calls[0].id, " ", calls[0].host, " ", calls[0].port), fmt.Sprint(calls[1].id, " ", calls[1].host, " ", calls[1].port)}
	if diff := cmp.Diff([]string{"c-7 elsewhere.example 8443", "h-7 10.0.0.1 22"}, got); diff != "" {
		t.Errorf("NetworkAsk's calls (-want +got):\n%s", diff)
	}

	c.spec.Confine = &Confinement{NetworkAsk: ask} // no allow-list: no proxy
	if cfg := c.proxyConfig(); cfg != nil {
		t.Errorf("without Network: config %+v, want none", cfg)
	}
}
