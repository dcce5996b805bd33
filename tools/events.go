package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/rpc"
)

// outputCoalesceCap is the most output bytes waiting per stream of a handle
// while the client reads slowly; older bytes beyond it are skipped (the
// artifact keeps them) and the next output notification says how many.
const outputCoalesceCap = 256 << 10

// watcher turns one command's events into notifications: stepTransition,
// heartbeat, output and $/progress. Events may arrive before Start returns;
// they wait on ready, closed once the ids are known.
type watcher struct {
	s           *rpc.Session
	notifySteps bool // stepTransition and heartbeat (always for handles; runCommand only with a token)
	title       string
	ready       chan struct{}

	// handleID, commandID and cmd are written before ready is closed and
	// read after.
	handleID, commandID string
	cmd                 *process.Command
	// progress is the handle's progress file, nil without one; set before
	// the command starts.
	progress *progressFile
	// eventSeq numbers the handle's events.
	eventSeq atomic.Int64

	mu sync.Mutex
	// token, begun, ended and carry are guarded by mu.
	token *protocol.ProgressToken
	begun bool
	// ended is set by finish: $/progress end is sent exactly once, there.
	ended bool
	// carry holds the bytes of a rune split across output chunks, per
	// stream (OnOutput is called in order for one stream).
	carry [len(streams)][]byte

	seq [len(streams)]atomic.Int64 // output seq per stream
}

// newWatcher returns a watcher; token may be nil.
func newWatcher(s *rpc.Session, token *protocol.ProgressToken, title string, notifySteps bool) *watcher {
	return &watcher{s: s, token: token, title: title, notifySteps: notifySteps, ready: make(chan struct{})}
}

// started records the command's ids and sends $/progress begin.
func (w *watcher) started(cmd *process.Command) {
	w.handleID, w.commandID, w.cmd = cmd.HandleID(), cmd.ID(), cmd
	close(w.ready)
	if w.progress != nil {
		w.progress.start(cmd)
	}
	w.begin()
}

// abandon releases events of a command that never started.
func (w *watcher) abandon() {
	close(w.ready)
	if w.progress != nil {
		w.progress.abandon()
	}
}

// setToken gives the watcher a token created after the start.
func (w *watcher) setToken(tok protocol.ProgressToken) bool {
	w.mu.Lock()
	if w.ended || w.token != nil {
		w.mu.Unlock()
		return false
	}
	w.token = &tok
	w.mu.Unlock()
	w.begin()
	return true
}

// begin sends $/progress begin once, if there is a token.
func (w *watcher) begin() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.token == nil || w.begun || w.ended {
		return
	}
	w.begun = true
	w.s.Notify(protocol.NotifyProgress, protocol.ProgressNotification{Token: *w.token, Value: protocol.WorkDoneProgressBegin{
		Kind: "begin", Title: w.title, Cancellable: true,
	}})
}

// observer returns the process observer.
func (w *watcher) observer(streamOutput bool) process.Observer {
	obs := process.Observer{OnStep: w.onStep, OnHeartbeat: w.onHeartbeat, OnEvent: w.onEvent, OnPort: w.onPort}
	if streamOutput {
		obs.OnOutput = w.onOutput
	}
	return obs
}

func (w *watcher) onStep(ev process.StepEvent) {
	<-w.ready
	ts := ev.TS
	if ts.IsZero() {
		ts = time.Now()
	}
	if w.progress != nil {
		// Written before the transition is sent: whoever saw it finds it
		// in the file.
		w.progress.step(ev, w.cmd.PID())
	}
	st := &protocol.StepTransitionParams{
		HandleID: w.handleID, CommandID: w.commandID, Step: ev.Step, Status: protocol.StepStatus(ev.Status),
		Index: ev.Index, Total: ev.Total, ElapsedMs: ev.Elapsed.Milliseconds(), TS: ts.UTC(),
	}
	if w.notifySteps {
		w.s.Notify(protocol.NotifyStepTransition, *st)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.token == nil || !w.begun || w.ended {
		return
	}
	report := protocol.WorkDoneProgressReport{Kind: "report", Cancellable: true, Message: st.Message()}
	if ev.Total > 0 {
		done := ev.Index - 1
		if ev.Status != string(protocol.StepStart) {
			done = ev.Index
		}
		pct := min(100, max(0, done*100/ev.Total))
		report.Percentage = &pct
	}
	w.s.NotifyCoalesced("progress/"+w.token.String(), replaceItem{method: protocol.NotifyProgress, params: protocol.ProgressNotification{Token: *w.token, Value: report}})
}

func (w *watcher) onHeartbeat(ev process.HeartbeatEvent) {
	<-w.ready
	if !w.notifySteps {
		return
	}
	w.s.NotifyCoalesced("heartbeat/"+w.commandID, replaceItem{method: protocol.NotifyHeartbeat, params: protocol.HeartbeatParams{
		HandleID: w.handleID, CommandID: w.commandID, Step: ev.Step, ElapsedMs: ev.Elapsed.Milliseconds(),
	}})
}

// streams are the output streams, in the order of per-stream arrays: each
// has its own seq, "pty" too, though a terminal's bytes are kept in
// stdout.log.
var streams = [...]protocol.Stream{protocol.StreamStdout, protocol.StreamStderr, protocol.StreamPty}

// streamIndex returns the index of a stream in per-stream arrays.
func streamIndex(stream string) int {
	switch protocol.Stream(stream) {
	case protocol.StreamStderr:
		return 1
	case protocol.StreamPty:
		return 2
	}
	return 0
}

func (w *watcher) onOutput(stream string, p []byte) {
	<-w.ready
	i := streamIndex(stream)
	w.mu.Lock()
	data := append(w.carry[i], p...)
	// Keep an incomplete rune at the end for the next chunk, so that text
	// split across reads still travels as text.
	cut := len(data)
	for k := 1; k <= utf8.UTFMax-1 && k <= len(data); k++ {
		b := data[len(data)-k]
		if utf8.RuneStart(b) {
			if !utf8.FullRune(data[len(data)-k:]) {
				cut = len(data) - k
			}
			break
		}
	}
	w.carry[i] = append([]byte(nil), data[cut:]...)
	data = data[:cut]
	w.mu.Unlock()
	if len(data) > 0 {
		w.sendOutput(stream, data)
	}
}

// sendOutput queues data as output, merged with what waits.
func (w *watcher) sendOutput(stream string, data []byte) {
	i := streamIndex(stream)
	w.s.NotifyCoalesced("output/"+w.commandID+"/"+stream, &outputItem{
		handleID: w.handleID, stream: protocol.Stream(stream), data: data, seq: &w.seq[i],
	})
}

// finish flushes what the watcher holds and sends $/progress end, exactly
// once: ended is set under mu by the first call and checked by every
// sender.
func (w *watcher) finish(res protocol.ToolResult) {
	if w.progress != nil {
		w.progress.finish(res) // the file says the end before the toolResult does
	}
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		return
	}
	w.ended = true
	carry := w.carry
	w.carry = [len(streams)][]byte{}
	token, begun := w.token, w.begun
	w.mu.Unlock()
	for i, c := range carry {
		if len(c) > 0 {
			w.sendOutput(string(streams[i]), c)
		}
	}
	if token != nil && begun {
		w.s.NotifyCritical(protocol.NotifyProgress, protocol.ProgressNotification{Token: *token, Value: protocol.WorkDoneProgressEnd{
			Kind: "end", Message: endMessage(res),
		}})
	}
}

// endMessage describes a result for $/progress end.
func endMessage(res protocol.ToolResult) string {
	switch {
	case res.Status != protocol.StatusCompleted:
		return string(res.Status)
	case res.ExitCode != nil:
		return fmt.Sprintf("completed (exit %d)", *res.ExitCode)
	}
	return string(res.Status)
}

// replaceItem is a coalesced notification that a newer one replaces.
type replaceItem struct {
	method string
	params any
}

func (r replaceItem) Method() string                              { return r.method }
func (r replaceItem) Merge(newer rpc.Coalescable) rpc.Coalescable { return newer }
func (r replaceItem) Params() any                                 { return r.params }

// outputItem is a pending output notification; later output of the same
// stream appends to it, and past outputCoalesceCap its oldest bytes are
// skipped.
type outputItem struct {
	handleID string
	stream   protocol.Stream
	skipped  int64
	data     []byte
	seq      *atomic.Int64
}

func (o *outputItem) Method() string { return protocol.NotifyOutput }

func (o *outputItem) Merge(newer rpc.Coalescable) rpc.Coalescable {
	n := newer.(*outputItem)
	o.skipped += n.skipped
	o.data = append(o.data, n.data...)
	if over := len(o.data) - outputCoalesceCap; over > 0 {
		// Skip whole runes so that the rest stays text.
		for over < len(o.data) && !utf8.RuneStart(o.data[over]) {
			over++
		}
		o.skipped += int64(over)
		o.data = append([]byte(nil), o.data[over:]...)
	}
	return o
}

// Params assigns the next seq of the stream: the writer calls it once per
// notification written, in order.
func (o *outputItem) Params() any {
	p := protocol.OutputParams{HandleID: o.handleID, Stream: o.stream, Seq: o.seq.Add(1), Skipped: o.skipped}
	if utf8.Valid(o.data) {
		p.Data = string(o.data)
	} else {
		p.Data = base64.StdEncoding.EncodeToString(o.data)
		p.Encoding = protocol.EncodingBase64
	}
	return p
}

// onEvent sends one JSON object line of a jsonl stdout as an event: never
// dropped or coalesced, it waits while the client reads slowly, and the
// command's pump, and so the command, waits with it.
func (w *watcher) onEvent(line []byte) {
	<-w.ready
	p := protocol.EventParams{HandleID: w.handleID, Seq: w.eventSeq.Add(1), Event: json.RawMessage(bytes.Clone(line))}
	if err := w.s.NotifyInOrder(context.Background(), protocol.NotifyEvent, p); err != nil {
		w.s.Logger().Warn("event not sent", "handle", w.handleID, "seq", p.Seq, "err", err)
	}
}

// onPort sends portOpened or portClosed; neither is ever dropped, so that
// every portOpened meets its portClosed.
func (w *watcher) onPort(ev process.PortEvent) {
	<-w.ready
	if ev.Open {
		w.s.NotifyCritical(protocol.NotifyPortOpened, protocol.PortOpenedParams{HandleID: w.handleID, Port: ev.Port.Port, Address: ev.Address, PID: ev.PID, InsidePort: ev.InsidePort, InsideAddress: ev.InsideAddress})
		return
	}
	w.s.NotifyCritical(protocol.NotifyPortClosed, protocol.PortClosedParams{HandleID: w.handleID, Port: ev.Port.Port, Address: ev.Address})
}
