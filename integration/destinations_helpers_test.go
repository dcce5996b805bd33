package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/internal/sshdtest"
	"github.com/toolhost/toolhost/protocol"
)

// dest is a destination of a test: a name, the command that reaches its
// toolhost, and that toolhost's root.
type dest struct {
	Name string
	// Argv reaches the far toolhost's stdio.
	Argv []string
	// Root is the far toolhost's root (its real path).
	Root string
}

// farRoot returns a new directory for a far toolhost's root, as its real
// path.
func farRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// sshDest is a destination reached over the test's sshd: ssh to root on
// 127.0.0.1 running the binary under test on a new root.
func sshDest(t testing.TB, d *sshdtest.Server, name string, extra ...string) dest {
	t.Helper()
	root := farRoot(t)
	return dest{Name: name, Argv: destinationArgv(d, root, extra...), Root: root}
}

// localDest is a direct local destination: the binary under test on a new
// root, its stdio the transport.
func localDest(t testing.TB, name string, extra ...string) dest {
	t.Helper()
	root := farRoot(t)
	return dest{Name: name, Argv: append([]string{binary, "--root", root}, extra...), Root: root}
}

// flag returns the dest as a --destination value, every word quoted.
func (d dest) flag() string {
	q := make([]string, len(d.Argv))
	for i, w := range d.Argv {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return d.Name + "=" + strings.Join(q, " ")
}

// startHub starts the server under test with the given destinations (and
// more flags).
func startHub(t testing.TB, dests []dest, args ...string) *server {
	t.Helper()
	var all []string
	for _, d := range dests {
		all = append(all, "--destination", d.flag())
	}
	return start(t, options{args: append(all, args...)})
}

// destinations calls destinations {}.
func (s *server) destinations() protocol.DestinationList {
	s.t.Helper()
	var l protocol.DestinationList
	s.mustCall("destinations", map[string]any{}, &l)
	return l
}

// destinationNamed returns the entry of name in l.
func destinationNamed(t testing.TB, l protocol.DestinationList, name string) protocol.DestinationInfo {
	t.Helper()
	for _, d := range l {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("destinations lists no %q: %+v", name, l)
	return protocol.DestinationInfo{}
}

// wantRPCError fails the test unless e is an error answer with code.
func wantRPCError(t testing.TB, what string, e *protocol.Error, code int) protocol.ErrorData {
	t.Helper()
	if e == nil {
		t.Fatalf("%s: answered a result, want error %d", what, code)
	}
	if int(e.Code) != code {
		t.Fatalf("%s: error %d %q (data %+v), want %d", what, e.Code, e.Message, e.Data, code)
	}
	return errData(e)
}

// awaitStream waits until the handle's streamed output of stream has
// contained text.
func (s *server) awaitStream(handle string, stream protocol.Stream, text string) {
	s.t.Helper()
	var seen strings.Builder
	s.waitFor(0, fmt.Sprintf("%s output %q of %s", stream, text, handle), func(m msg) bool {
		var o protocol.OutputParams
		if m.Method != "output" || json.Unmarshal(m.Params, &o) != nil || o.HandleID != handle || o.Stream != stream {
			return false
		}
		seen.WriteString(o.Data)
		return strings.Contains(seen.String(), text)
	})
}

// toolResultCount returns how many toolResults name handle so far.
func (s *server) toolResultCount(handle string) int {
	n := 0
	for _, p := range s.notifications("toolResult") {
		if idsOf(p).HandleID == handle {
			n++
		}
	}
	return n
}

// awaitProcs waits until a process of mk runs and returns what runs,
// polling /proc (the far side is this machine).
func awaitProcs(t testing.TB, mk marker) []procOf {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		if found := scanProcs(mk, ""); len(found) > 0 {
			return found
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("no process of %s appeared within %v", mk.Sleep, waitLimit)
			return nil
		}
	}
}

// procStat returns a process's parent and command name from /proc.
func procStat(pid int) (ppid int, comm string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", false
	}
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return 0, "", false
	}
	fields := strings.Fields(string(b[end+1:]))
	if len(fields) < 2 {
		return 0, "", false
	}
	ppid, err = strconv.Atoi(fields[1])
	return ppid, string(b[open+1 : end]), err == nil
}

// ancestry returns the command names of pid's ancestors, nearest first.
func ancestry(pid int) (names []string, pids []int) {
	for p := pid; p > 1; {
		ppid, _, ok := procStat(p)
		if !ok {
			break
		}
		_, comm, ok := procStat(ppid)
		if !ok {
			break
		}
		names, pids = append(names, comm), append(pids, ppid)
		p = ppid
	}
	return names, pids
}

// childrenNamed returns the pids of parent's children whose command name
// is comm.
func childrenNamed(parent int, comm string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, c, ok := procStat(pid); ok && ppid == parent && c == comm {
			out = append(out, pid)
		}
	}
	return out
}

// checkFarSide fails the test unless every process found runs on the far
// side: under an sshd and not under the server under test (ssh), or with
// a nearest toolhost ancestor that is not the server under test (local).
func checkFarSide(t testing.TB, s *server, found []procOf, viaSSH bool) {
	t.Helper()
	for _, p := range found {
		names, pids := ancestry(p.PID)
		far := false
		for i, pid := range pids {
			if pid == s.cmd.Process.Pid {
				if viaSSH {
					far = false
				}
				break
			}
			if viaSSH && names[i] == "sshd" {
				far = true
			}
			if !viaSSH && names[i] == "toolhost" {
				far = true
				break
			}
		}
		if !far {
			t.Errorf("%v: ancestors %v (pids %v), server %d: not on the far side", p, names, pids, s.cmd.Process.Pid)
		}
	}
}
