package azuritetest

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestStartStop starts Azurite, asks its blob service something, and
// stops it: its port refuses connections once Stop returns, and a second
// Stop returns too.
func TestStartStop(t *testing.T) {
	s := Start(t)
	if want := "http://127.0.0.1:" + strconv.Itoa(s.Port) + "/devstoreaccount1"; s.Endpoint != want {
		t.Errorf("endpoint %q, want %q", s.Endpoint, want)
	}
	// Anonymous: Azurite answers with an error of its own, and its name.
	resp, err := http.Get(s.Endpoint + "/nocontainer?restype=container")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Server"); !strings.HasPrefix(got, "Azurite-Blob/3.34.0") {
		t.Errorf("Server: %q, want Azurite-Blob/3.34.0", got)
	}
	s.Stop()
	if c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))); err == nil {
		c.Close()
		t.Errorf("port %d still accepts connections after Stop", s.Port)
	}
	if s.d.Cmd.ProcessState == nil {
		t.Errorf("Stop returned before Azurite was reaped")
	}
	s.Stop()
}

// TestTwoAtOnce runs two Azurites side by side: each chose a port of its
// own.
func TestTwoAtOnce(t *testing.T) {
	a, b := Start(t), Start(t)
	if a.Port == b.Port {
		t.Fatalf("both on port %d", a.Port)
	}
}
