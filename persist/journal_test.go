package persist

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/tools"
)

// journalPair is a journal that compacts and one that never does, given
// the same records in the same order.
type journalPair struct {
	mu       sync.Mutex // orders each record into both journals alike
	got, ref *journal
}

func newJournalPair(t *testing.T, keep int) *journalPair {
	t.Helper()
	dir := t.TempDir()
	first := record{Kind: "session", V: journalVersion, ID: "s-1", Root: "/root", Holder: &holderID{PID: 10, Start: 20},
		Leftovers: &process.Leftovers{Marker: "m-1", Cgroup: "/sys/fs/cgroup/a"}}
	var p journalPair
	for _, jp := range []**journal{&p.got, &p.ref} {
		j, err := createJournal(filepath.Join(dir, fmt.Sprintf("%p.journal", jp)), first)
		if err != nil {
			t.Fatal(err)
		}
		*jp = j
	}
	p.got.keep, p.ref.keep = keep, 1<<30
	return &p
}

func (p *journalPair) started(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, j := range []*journal{p.got, p.ref} {
		j.handle(tools.HandleStarted{HandleID: fmt.Sprintf("h-%d", n), CommandID: fmt.Sprintf("c-%d", n), Command: "true"})
	}
}

func (p *journalPair) result(seq int64, n int) {
	msg := fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"toolResult","params":{"handleId":"h-%d","commandId":"c-%d","status":"exited","seq":%d}}`, n, n, seq)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, j := range []*journal{p.got, p.ref} {
		j.Numbered(seq, msg)
	}
}

func (p *journalPair) written(seq int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, j := range []*journal{p.got, p.ref} {
		j.Written(seq)
	}
}

func (p *journalPair) holder(pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, j := range []*journal{p.got, p.ref} {
		if err := j.append(record{Kind: "holder", Holder: &holderID{PID: pid, Start: 1}, Leftovers: &process.Leftovers{Marker: fmt.Sprintf("m-%d", pid)}}); err != nil {
			panic(err)
		}
	}
}

// journalView is what a later holder takes from a journal: see adopt and
// wake.
type journalView struct {
	Holder    holderID
	Leftovers []process.Leftovers
	Running   []string         // handles without a toolResult: they end lost
	Unwritten map[int64]string // toolResults a resume still gets
	MaxHandle uint64           // new handles are numbered after it
}

func viewOf(t *testing.T, path string) (journalView, map[int64]string) {
	t.Helper()
	rp, err := readJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	v := journalView{Holder: rp.holder, Leftovers: rp.leftovers, Unwritten: map[int64]string{}, MaxHandle: maxHandleNumber(rp)}
	ended := map[string]bool{}
	writtenMsgs := map[int64]string{}
	for _, r := range rp.results {
		ended[r.handle] = true
		if r.written {
			writtenMsgs[r.seq] = string(r.message)
		} else {
			v.Unwritten[r.seq] = string(r.message)
		}
	}
	for _, hs := range rp.handles {
		if !ended[hs.HandleID] {
			v.Running = append(v.Running, hs.HandleID)
		}
	}
	slices.Sort(v.Running)
	return v, writtenMsgs
}

// checkCompacted compares the compacting journal of p with the one that
// never compacts, once both are closed: a later holder sees the same
// holders, leftovers, running handles, undelivered toolResults and
// highest handle number in both; the compacted one keeps at least the
// keep written toolResults of highest seq, exactly as written, and not
// many more.
func checkCompacted(t *testing.T, p *journalPair, keep int) {
	t.Helper()
	p.got.compactor.Wait() // the last compaction, which ends within the bound
	p.got.close()
	p.ref.close()
	got, gotWritten := viewOf(t, p.got.path)
	want, wantWritten := viewOf(t, p.ref.path)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("what a later holder takes mismatch (-want +got):\n%s", diff)
	}
	seqs := slices.Sorted(func(yield func(int64) bool) {
		for s := range wantWritten {
			if !yield(s) {
				return
			}
		}
	})
	for _, s := range seqs[max(0, len(seqs)-keep):] {
		if gotWritten[s] != wantWritten[s] {
			t.Errorf("written toolResult %d: got %q, want %q", s, gotWritten[s], wantWritten[s])
		}
	}
	for s, m := range gotWritten {
		if m != wantWritten[s] {
			t.Errorf("written toolResult %d kept as %q, was %q", s, m, wantWritten[s])
		}
	}
	// keep, a quarter more before the next compaction, and the highest
	// handle's.
	if n := len(gotWritten); n > keep+keep/4+1 || len(seqs) > keep+keep/4+1 && n >= len(seqs) {
		t.Errorf("the compacted journal keeps %d of %d written toolResults, keep %d", n, len(seqs), keep)
	}
	gi, err := os.Stat(p.got.path)
	if err != nil {
		t.Fatal(err)
	}
	ri, err := os.Stat(p.ref.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compacted %d bytes, uncompacted %d", gi.Size(), ri.Size())
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(p.got.path), ".*.tmp-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestJournalCompacts checks that a journal holding more written
// toolResults than it keeps is rewritten with what a later holder needs
// and no more: the running handles (which a later holder ends "lost"),
// every undelivered toolResult, the last kept written ones, every holder's
// leftovers, and the highest handle number, even when that handle ended
// long ago.
func TestJournalCompacts(t *testing.T) {
	const keep = 20
	p := newJournalPair(t, keep)
	// The highest-numbered handle starts and ends first.
	p.started(1000)
	p.result(1, 1000)
	p.written(1)
	p.started(1) // runs throughout
	seq := int64(1)
	for n := 2; n < 500; n++ {
		p.started(n)
		seq++
		p.result(seq, n)
		if n%37 != 0 { // some are never delivered
			p.written(seq)
		}
		if n == 250 {
			p.holder(30)
		}
	}
	p.started(500) // and one started last, still running
	checkCompacted(t, p, keep)
}

// TestJournalCompactsUnderAppends checks compaction while records keep
// coming from several goroutines, as toolResults of concurrent commands
// do: nothing appended while a compaction runs is lost.
func TestJournalCompactsUnderAppends(t *testing.T) {
	const keep = 50
	p := newJournalPair(t, keep)
	var (
		mu   sync.Mutex
		next int64
		wg   sync.WaitGroup // owns the writers; waited below
	)
	for w := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for i := range 1500 {
				n := w*10000 + i + 1
				p.started(n)
				if r.IntN(50) == 0 {
					continue // still running
				}
				mu.Lock()
				next++
				s := next
				p.result(s, n) // under mu: results are numbered in order
				mu.Unlock()
				if r.IntN(20) != 0 {
					p.written(s)
				}
			}
		})
	}
	wg.Wait()
	checkCompacted(t, p, keep)
}

// TestJournalEndsDuringCompaction checks that ending a session while its
// journal is being compacted leaves its tombstone, never the compacted
// journal over it, and no temporary file.
func TestJournalEndsDuringCompaction(t *testing.T) {
	for i := range 20 {
		p := newJournalPair(t, 4)
		for n := 1; n <= 6+i%4; n++ {
			p.started(n)
			p.result(int64(n), n)
			p.written(int64(n))
		}
		if err := p.got.end("s-1", "/root", "ended"); err != nil {
			t.Fatal(err)
		}
		rp, err := readJournal(p.got.path)
		if err != nil {
			t.Fatal(err)
		}
		if !rp.ended {
			t.Fatalf("run %d: the journal is not a tombstone after end", i)
		}
		if left, _ := filepath.Glob(filepath.Join(filepath.Dir(p.got.path), ".*.tmp-*")); len(left) > 0 {
			t.Fatalf("run %d: temporary files left: %v", i, left)
		}
		p.ref.close()
	}
}

// previousJournal is a journal as the build before record kinds were
// constants wrote it, with a torn last line.
const previousJournal = `{"kind":"session","v":1,"id":"s-1","root":"/root","createdAt":"2026-01-02T03:04:05Z","holder":{"pid":10,"start":20},"leftovers":{"marker":"m-1","cgroup":"/sys/fs/cgroup/a"},"lingerMs":600000,"init":{"processId":1}}
{"kind":"handle","handle":{"handleId":"h-1","commandId":"c-1","startedAt":"2026-01-02T03:04:06Z","command":"true"}}
{"kind":"handle","handle":{"handleId":"h-2","commandId":"c-2","startedAt":"2026-01-02T03:04:07Z","command":"sleep 1"}}
{"kind":"result","seq":1,"message":{"jsonrpc":"2.0","method":"toolResult","params":{"handleId":"h-1","commandId":"c-1","status":"exited","seq":1}}}
{"kind":"written","seq":1}
{"kind":"holder","holder":{"pid":30,"start":1},"leftovers":{"marker":"m-30"}}
{"kind":"resu`

// TestJournalReadsThePreviousFormat checks that a journal the previous
// build wrote is read as it was, that compacting it writes the same lines
// again, and that a journal of another version is refused.
func TestJournalReadsThePreviousFormat(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s-1.journal")
	if err := os.WriteFile(path, []byte(previousJournal), 0o600); err != nil {
		t.Fatal(err)
	}
	v, written := viewOf(t, path)
	want := journalView{
		Holder:    holderID{PID: 30, Start: 1},
		Leftovers: []process.Leftovers{{Marker: "m-1", Cgroup: "/sys/fs/cgroup/a"}, {Marker: "m-30"}},
		Running:   []string{"h-2"},
		Unwritten: map[int64]string{},
		MaxHandle: 2,
	}
	if diff := cmp.Diff(want, v); diff != "" {
		t.Errorf("the previous build's journal read (-want +got):\n%s", diff)
	}
	if len(written) != 1 || written[1] == "" {
		t.Errorf("written toolResults %v, want seq 1", written)
	}
	rp, err := readJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if rp.first.LingerMs != 600000 || string(rp.first.Init) != `{"processId":1}` || rp.first.CreatedAt.IsZero() {
		t.Errorf("the session record read as %+v", rp.first)
	}
	var again []string
	for _, r := range rp.compacted(10).records() {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		again = append(again, string(b))
	}
	lines := strings.Split(previousJournal, "\n")
	lines = lines[:len(lines)-1] // the torn line
	slices.Sort(lines)
	slices.Sort(again)
	if diff := cmp.Diff(lines, again); diff != "" {
		t.Errorf("a compaction writes other lines than the previous build's (-previous +again):\n%s", diff)
	}

	other := filepath.Join(dir, "s-2.journal")
	if err := os.WriteFile(other, []byte(strings.Replace(previousJournal, `"v":1`, `"v":2`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readJournal(other); !errors.Is(err, errJournalVersion) {
		t.Errorf("a journal of version 2 read with %v, want errJournalVersion", err)
	}
}
