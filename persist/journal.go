package persist

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/tools"
)

// journalVersion is the version of the journal's format, in its first
// record; a journal of another version is left alone.
const journalVersion = 1

// record is one line of a journal. Kind says which fields it uses:
//
//	session  V, ID, Root, Workspace, MCP, CreatedAt, Holder, Leftovers,
//	         Init (first line)
//	holder   Holder, Leftovers: a later holder took the session over, with
//	         its own commands' leftovers
//	handle   Handle: a handle started
//	result   Seq, Message: a toolResult was made (the whole encoded message)
//	written  Seq: that toolResult was written to a connection
//	ended    V, ID, Root, Reason, At: the session ended (a tombstone, alone)
type record struct {
	Kind string `json:"kind"`
	V    int    `json:"v,omitempty"`
	ID   string `json:"id,omitempty"`
	// Root is the holder's root: the holder that takes the session over
	// once its own has died is that root's. Workspace is the session's
	// workspace root when the client narrowed it to another.
	Root      string `json:"root,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	// MCP says a shared MCP server serves the session: no resume reaches
	// it.
	MCP       bool                 `json:"mcp,omitempty"`
	CreatedAt time.Time            `json:"createdAt,omitzero"`
	Holder    *holderID            `json:"holder,omitempty"`
	Leftovers *process.Leftovers   `json:"leftovers,omitempty"`
	LingerMs  int64                `json:"lingerMs,omitempty"`
	Init      json.RawMessage      `json:"init,omitempty"`
	Handle    *tools.HandleStarted `json:"handle,omitempty"`
	Seq       int64                `json:"seq,omitempty"`
	Message   json.RawMessage      `json:"message,omitempty"`
	Reason    string               `json:"reason,omitempty"`
	At        time.Time            `json:"at,omitzero"`
}

// holderID names a holder process: its pid and its start time in clock
// ticks since boot, so that a reused pid is not taken for it.
type holderID struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// journal appends a session's records. It implements rpc.Journal.
//
// A journal is compacted (see compact) once it holds more written
// toolResults than a session's ledger keeps, so that a session that lives
// for weeks and runs a million commands keeps a journal of about the size
// of its ledger, not of its history.
type journal struct {
	path string
	// keep is how many toolResults already written to a connection a
	// compaction keeps: rpc.LedgerKeepWritten, as many as the session's
	// ledger keeps for a resume.
	keep int

	mu sync.Mutex
	f  *os.File // nil once closed; guarded by mu
	// size is the file's length: every append adds to it; guarded by mu.
	size int64
	// nWritten counts the written records in the file (those a
	// compaction kept and those appended since); guarded by mu.
	nWritten int
	// compacting is true while a compaction runs; guarded by mu.
	compacting bool
	// compactor owns a compaction's goroutine; close and end wait for it.
	compactor sync.WaitGroup
}

// newJournal returns the journal appending to f, the file at path, whose
// length is size.
func newJournal(path string, f *os.File, size int64) *journal {
	return &journal{path: path, f: f, size: size, keep: rpc.LedgerKeepWritten}
}

// createJournal starts the journal of a session with its first record.
func createJournal(path string, first record) (*journal, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot create the session's journal: %w", err)
	}
	j := newJournal(path, f, 0)
	if err := j.append(first); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	return j, nil
}

// openJournal reopens a journal to append to it. The written records it
// already holds count towards its next compaction only once it has one:
// a journal is read whole when adopted anyway.
func openJournal(path string) (*journal, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return newJournal(path, f, fi.Size()), nil
}

// append writes one record as one line, with one write.
func (j *journal) append(r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.appendLocked(b)
}

// appendLocked writes line b. The caller holds mu.
func (j *journal) appendLocked(b []byte) error {
	if j.f == nil {
		return os.ErrClosed
	}
	n, err := j.f.Write(b)
	j.size += int64(n)
	return err
}

// Numbered records a toolResult as it is made.
func (j *journal) Numbered(seq int64, message []byte) {
	_ = j.append(record{Kind: "result", Seq: seq, Message: message})
}

// Written records that a toolResult reached a connection, and starts a
// compaction once the journal holds a quarter more written toolResults
// than it keeps (so that each costs O(1) on average, as the ledger's
// pruning does).
func (j *journal) Written(seq int64) {
	b, err := json.Marshal(record{Kind: "written", Seq: seq})
	if err != nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.appendLocked(append(b, '\n')) != nil {
		return
	}
	j.nWritten++
	if j.nWritten > j.keep+j.keep/4 && !j.compacting {
		j.compacting = true
		j.compactor.Go(j.compact)
	}
}

// handle records a handle that started.
func (j *journal) handle(h tools.HandleStarted) {
	_ = j.append(record{Kind: "handle", Handle: &h})
}

// end replaces the journal, whole, by its tombstone, once a compaction
// under way has given up.
func (j *journal) end(id, root, reason string) error {
	j.close()
	return writeTombstone(j.path, record{Kind: "ended", V: journalVersion, ID: id, Root: root, Reason: reason, At: time.Now().UTC()})
}

// close closes the journal, leaving it as it is, and waits for a
// compaction under way, which then gives up.
func (j *journal) close() {
	j.mu.Lock()
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
	j.mu.Unlock()
	j.compactor.Wait()
}

// writeTombstone writes r as the whole file at path: a temporary file
// beside it, synced, then renamed over it.
func writeTombstone(path string, r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tomb-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o600)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// replay is what a journal says of its session.
type replay struct {
	first     record                // the session record, or the tombstone
	holder    holderID              // the last holder that took it
	leftovers []process.Leftovers   // every holder's, to kill
	handles   []tools.HandleStarted // in start order
	results   []result              // in seq order
	ended     bool                  // a tombstone
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
	rp := &replay{}
	bySeq := map[int64]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	first := true
	for sc.Scan() {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			continue // a torn line
		}
		if first {
			first = false
			if r.V != journalVersion {
				return nil, fmt.Errorf("%s: version %d: %w", path, r.V, errJournalVersion)
			}
			rp.first = r
			rp.ended = r.Kind == "ended"
			if r.Holder != nil {
				rp.holder = *r.Holder
			}
			if r.Leftovers != nil {
				rp.leftovers = append(rp.leftovers, *r.Leftovers)
			}
			continue
		}
		switch r.Kind {
		case "holder":
			if r.Holder != nil {
				rp.holder = *r.Holder
			}
			if r.Leftovers != nil {
				rp.leftovers = append(rp.leftovers, *r.Leftovers)
			}
		case "handle":
			if r.Handle != nil {
				rp.handles = append(rp.handles, *r.Handle)
			}
		case "result":
			bySeq[r.Seq] = len(rp.results)
			rp.results = append(rp.results, result{seq: r.Seq, message: r.Message, handle: resultHandle(r.Message)})
		case "written":
			if i, ok := bySeq[r.Seq]; ok {
				rp.results[i].written = true
			}
		}
	}
	if first {
		return nil, fmt.Errorf("%s: empty journal", path)
	}
	return rp, sc.Err()
}
