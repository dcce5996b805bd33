package integration

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

// listenScript is a Python listener on an ephemeral port of addr that
// prints the port it got, then waits.
func listenScript(family, addr string) string {
	return fmt.Sprintf(`import socket, sys, time
s = socket.socket(socket.%s, socket.SOCK_STREAM)
s.bind((%q, 0))
s.listen()
print("listening on", s.getsockname()[1], flush=True)
sys.stdin.read()
`, family, addr)
}

var listeningOn = regexp.MustCompile(`listening on (\d+)`)

// awaitPort waits for the port the child printed.
func (s *server) awaitPrintedPort(handle string) int {
	s.t.Helper()
	var seen string
	s.waitFor(0, "the printed port of "+handle, func(m msg) bool {
		var o protocol.OutputParams
		if m.Method != "output" || json.Unmarshal(m.Params, &o) != nil || o.HandleID != handle {
			return false
		}
		seen += o.Data
		return listeningOn.MatchString(seen)
	})
	port, _ := strconv.Atoi(listeningOn.FindStringSubmatch(seen)[1])
	return port
}

// TestPortOpenedAndClosed starts listeners — IPv4 by the command itself,
// IPv6 by a grandchild — and sees portOpened with the right port, address
// and pid, the port in progress, and portClosed once the handle is
// cancelled, before its toolResult.
func TestPortOpenedAndClosed(t *testing.T) {
	t.Parallel()
	s := start(t, options{})
	s.initialize(nil)
	cases := []struct {
		name       string
		argv       []string
		address    string
		grandchild bool
	}{
		{"ipv4, the command", []string{"python3", "-c", listenScript("AF_INET", "127.0.0.1")}, "127.0.0.1", false},
		{"ipv6, a grandchild", []string{"sh", "-c", "exec 3<&0; python3 -c '" + listenScript("AF_INET6", "::1") + "' <&3 & wait"}, "::1", true},
	}
	for _, c := range cases {
		h := s.longRun(map[string]any{"argv": c.argv, "streamOutput": true, "openStdin": true})
		port := s.awaitPrintedPort(h.HandleID)
		var opened protocol.PortOpenedParams
		s.notification("portOpened", 1, forHandle(h.HandleID), &opened)
		if diff := cmp.Diff(protocol.PortOpenedParams{HandleID: h.HandleID, Port: port, Address: c.address}, opened, cmpIgnoreFields("PID")); diff != "" {
			t.Errorf("%s: portOpened mismatch (-want +got):\n%s", c.name, diff)
		}
		if c.grandchild && opened.PID == h.PID || opened.PID <= 0 {
			t.Errorf("%s: portOpened pid %d (the command is %d)", c.name, opened.PID, h.PID)
		}
		var snap protocol.Progress
		s.mustCall("progress", map[string]any{"handleId": h.HandleID}, &snap)
		if diff := cmp.Diff([]protocol.Port{{Port: port, Address: c.address, PID: opened.PID}}, snap.Ports); diff != "" {
			t.Errorf("%s: progress ports mismatch (-want +got):\n%s", c.name, diff)
		}
		var res protocol.ToolResult
		s.mustCall("cancel", map[string]any{"handleId": h.HandleID, "graceMs": 200}, &res)
		var closed protocol.PortClosedParams
		_, closedAt := s.waitFor(0, "portClosed of "+h.HandleID, func(m msg) bool {
			return m.Method == "portClosed" && json.Unmarshal(m.Params, &closed) == nil && closed.HandleID == h.HandleID
		})
		if diff := cmp.Diff(protocol.PortClosedParams{HandleID: h.HandleID, Port: port, Address: c.address}, closed); diff != "" {
			t.Errorf("%s: portClosed mismatch (-want +got):\n%s", c.name, diff)
		}
		_, resultAt := s.waitFor(0, "toolResult of "+h.HandleID, func(m msg) bool {
			return m.Method == "toolResult" && forHandle(h.HandleID)(m.Params)
		})
		if closedAt > resultAt {
			t.Errorf("%s: portClosed came after the toolResult", c.name)
		}
		if n := len(progDecodeAll[protocol.PortOpenedParams](s, "portOpened", forHandle(h.HandleID))); n != 1 {
			t.Errorf("%s: %d portOpened, want exactly 1", c.name, n)
		}
	}
}
