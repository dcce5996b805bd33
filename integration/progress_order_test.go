package integration

import (
	"fmt"
	"testing"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// TestProgressNotificationsFollowTheResponse starts many handles at once
// whose children report at once, and checks that nothing about a handle
// (stepTransition, heartbeat, output, $/progress on its token, toolResult)
// reaches the client before the longRunning response that names it.
func TestProgressNotificationsFollowTheResponse(t *testing.T) {
	forEachFraming(t, func(t *testing.T, framing string) {
		s := start(t, options{framing: framing})
		s.initialize(nil)
		const n = 20
		script := `echo '{"type":"step_transition","step":"first","status":"start"}' >&2
echo '{"type":"heartbeat","step":"first"}' >&2
echo out; echo err >&2`
		ids := make([]*client.Pending, n)
		for i := range ids {
			ids[i] = s.request("longRunning", map[string]any{
				"argv": []string{"sh", "-c", script}, "streamOutput": true, "workDoneToken": fmt.Sprintf("ord-%d", i),
			})
		}
		handles := make(map[string]int)                // handleId → index of its response
		tokens := make(map[protocol.ProgressToken]int) // token → index of its handle's response
		for i, p := range ids {
			var h protocol.LongRunningResult
			if e := s.answer(p, &h); e != nil {
				t.Fatalf("longRunning %d: %v", i, e)
			}
			_, at := s.responseAt(wireID(p))
			handles[h.HandleID] = at
			tokens[protocol.NewStringToken(fmt.Sprintf("ord-%d", i))] = at
		}
		for h := range handles {
			s.toolResultOf(h)
		}

		s.mu.Lock()
		msgs := append([]msg(nil), s.msgs...)
		s.mu.Unlock()
		seen := map[string]int{}
		for at, m := range msgs {
			if m.Method == "" || m.ID != nil {
				continue
			}
			resp, ok := handles[idsOf(m.Params).HandleID]
			if n, err := progNoticeOf(m.Params); !ok && m.Method == "$/progress" && err == nil {
				resp, ok = tokens[n.Token]
			}
			if !ok {
				continue
			}
			seen[m.Method]++
			if at < resp {
				t.Errorf("%s (message %d) came before the response that names its handle (message %d): %s", m.Method, at, resp, m.raw)
			}
		}
		for _, method := range []string{"stepTransition", "heartbeat", "output", "$/progress", "toolResult"} {
			if seen[method] == 0 {
				t.Errorf("no %s about the handles: the test saw nothing to order", method)
			}
		}
	})
}
