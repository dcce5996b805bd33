package persist

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/tools"
)

// replay is what a journal says of its session: its records, applied in
// their order. A later holder takes a session over from it (adopt, wake),
// and a compaction writes again the part of it a later holder needs.
type replay struct {
	first     record                // the session record, or the tombstone
	holders   []record              // the holder records, in their order
	holder    holderID              // the last holder that took it
	leftovers []process.Leftovers   // every holder's, to kill
	handles   []tools.HandleStarted // in start order
	results   []result              // in the order they were made
	ended     bool                  // a tombstone

	bySeq map[int64]int // the index in results of each seq
}

// result is a toolResult a journal holds.
type result struct {
	seq     int64
	message json.RawMessage
	written bool
	handle  string // its handleId
}

// errJournalVersion is the error of a journal of another format version.
var errJournalVersion = errors.New("journal of another version")

// readJournal replays the journal at path. A torn last line (a write cut
// by a crash) is ignored.
func readJournal(path string) (*replay, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return replayOf(path, b)
}

// replayOf replays b, the journal at path (or the part of it a compaction
// reads), after checking its version.
func replayOf(path string, b []byte) (*replay, error) {
	var rp *replay
	err := eachRecord(b, func(r record) error {
		if rp != nil {
			rp.apply(r)
			return nil
		}
		if r.V != journalVersion {
			return fmt.Errorf("%s: version %d: %w", path, r.V, errJournalVersion)
		}
		rp = newReplay(r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if rp == nil {
		return nil, fmt.Errorf("%s: empty journal", path)
	}
	return rp, nil
}

// eachRecord calls fn with each record of the journal lines b, in order,
// until fn returns an error. A line that does not decode is skipped: only
// the last can be torn, and it was never a record.
func eachRecord(b []byte, fn func(record) error) error {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var r record
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			continue
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return sc.Err()
}

// newReplay returns the replay of a journal whose first record is first:
// a session record or a tombstone.
func newReplay(first record) *replay {
	rp := &replay{first: first, ended: first.Kind == kindEnded, bySeq: map[int64]int{}}
	rp.tookOver(first)
	return rp
}

// apply applies a record after the first: this is where each kind of
// record is interpreted.
func (rp *replay) apply(r record) {
	switch r.Kind {
	case kindHolder:
		rp.holders = append(rp.holders, r)
		rp.tookOver(r)
	case kindHandle:
		if r.Handle != nil {
			rp.handles = append(rp.handles, *r.Handle)
		}
	case kindResult:
		rp.bySeq[r.Seq] = len(rp.results)
		rp.results = append(rp.results, result{seq: r.Seq, message: r.Message, handle: resultHandle(r.Message)})
	case kindWritten:
		if i, ok := rp.bySeq[r.Seq]; ok {
			rp.results[i].written = true
		}
	}
}

// records returns the records that replay to rp, in an order apply
// takes: the first, the holder records, the handles, then each toolResult
// with its written record. A compaction writes a replay again with them.
func (rp *replay) records() []record {
	out := append([]record{rp.first}, rp.holders...)
	for _, hs := range rp.handles {
		out = append(out, record{Kind: kindHandle, Handle: &hs})
	}
	for _, r := range rp.results {
		out = append(out, record{Kind: kindResult, Seq: r.seq, Message: r.message})
		if r.written {
			out = append(out, record{Kind: kindWritten, Seq: r.seq})
		}
	}
	return out
}

// nWritten counts the toolResults rp holds that were written to a
// connection.
func (rp *replay) nWritten() int {
	n := 0
	for _, r := range rp.results {
		if r.written {
			n++
		}
	}
	return n
}

// tookOver notes the holder, and its commands' leftovers, that r (a
// session or holder record) names.
func (rp *replay) tookOver(r record) {
	if r.Holder != nil {
		rp.holder = *r.Holder
	}
	if r.Leftovers != nil {
		rp.leftovers = append(rp.leftovers, *r.Leftovers)
	}
}

// resultHandle returns the handleId of an encoded toolResult message.
func resultHandle(message json.RawMessage) string {
	var p struct {
		Params struct {
			HandleID string `json:"handleId"`
		} `json:"params"`
	}
	_ = json.Unmarshal(message, &p)
	return p.Params.HandleID
}
