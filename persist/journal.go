package persist

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/toolhost/toolhost/internal/fsutil"
	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/rpc"
	"github.com/toolhost/toolhost/tools"
)

// journalVersion is the version of the journal's format, in its first
// record; a journal of another version is left alone.
const journalVersion = 1

// recordKind says what a record says, and which of its fields it uses.
// replay.apply is where a journal's records are interpreted.
type recordKind string

// The kinds of record, as they are on disk.
const (
	// kindSession: V, ID, Root, Workspace, MCP, CreatedAt, Holder,
	// Leftovers, LingerMs, Init. The first line.
	kindSession recordKind = "session"
	// kindHolder: Holder, Leftovers. A later holder took the session
	// over, with its own commands' leftovers.
	kindHolder recordKind = "holder"
	// kindHandle: Handle. A handle started.
	kindHandle recordKind = "handle"
	// kindResult: Seq, Message. A toolResult was made (the whole encoded
	// message).
	kindResult recordKind = "result"
	// kindWritten: Seq. That toolResult was written to a connection.
	kindWritten recordKind = "written"
	// kindEnded: V, ID, Root, Reason, At. The session ended: a tombstone,
	// the journal's only line.
	kindEnded recordKind = "ended"
)

// record is one line of a journal; Kind says which fields it uses.
type record struct {
	Kind recordKind `json:"kind"`
	V    int        `json:"v,omitempty"`
	ID   string     `json:"id,omitempty"`
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
	_ = j.append(record{Kind: kindResult, Seq: seq, Message: message})
}

// Written records that a toolResult reached a connection, and starts a
// compaction once the journal holds a quarter more written toolResults
// than it keeps (so that each costs O(1) on average, as the ledger's
// pruning does).
func (j *journal) Written(seq int64) {
	b, err := json.Marshal(record{Kind: kindWritten, Seq: seq})
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
	_ = j.append(record{Kind: kindHandle, Handle: &h})
}

// end replaces the journal, whole, by its tombstone, once a compaction
// under way has given up.
func (j *journal) end(id, root, reason string) error {
	j.close()
	return writeTombstone(j.path, record{Kind: kindEnded, V: journalVersion, ID: id, Root: root, Reason: reason, At: time.Now().UTC()})
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

// writeTombstone writes r as the whole file at path, 0600: a temporary
// file beside it, synced, then renamed over it.
func writeTombstone(path string, r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return fsutil.WriteFile(path, append(b, '\n'), 0o600, fsutil.SyncFile)
}
