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
type journal struct {
	path string

	mu sync.Mutex
	f  *os.File // nil once closed; guarded by mu
}

// createJournal starts the journal of a session with its first record.
func createJournal(path string, first record) (*journal, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot create the session's journal: %w", err)
	}
	j := &journal{path: path, f: f}
	if err := j.append(first); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	return j, nil
}

// openJournal reopens a journal to append to it.
func openJournal(path string) (*journal, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &journal{path: path, f: f}, nil
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
	if j.f == nil {
		return os.ErrClosed
	}
	_, err = j.f.Write(b)
	return err
}

// Numbered records a toolResult as it is made.
func (j *journal) Numbered(seq int64, message []byte) {
	_ = j.append(record{Kind: "result", Seq: seq, Message: message})
}

// Written records that a toolResult reached a connection.
func (j *journal) Written(seq int64) {
	_ = j.append(record{Kind: "written", Seq: seq})
}

// handle records a handle that started.
func (j *journal) handle(h tools.HandleStarted) {
	_ = j.append(record{Kind: "handle", Handle: &h})
}

// end replaces the journal, whole, by its tombstone.
func (j *journal) end(id, root, reason string) error {
	j.mu.Lock()
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
	j.mu.Unlock()
	return writeTombstone(j.path, record{Kind: "ended", V: journalVersion, ID: id, Root: root, Reason: reason, At: time.Now().UTC()})
}

// close closes the journal, leaving it as it is.
func (j *journal) close() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
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
			var p struct {
				Params struct {
					HandleID string `json:"handleId"`
				} `json:"params"`
			}
			_ = json.Unmarshal(r.Message, &p)
			bySeq[r.Seq] = len(rp.results)
			rp.results = append(rp.results, result{seq: r.Seq, message: r.Message, handle: p.Params.HandleID})
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
