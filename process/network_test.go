package process

import (
	"bufio"
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
