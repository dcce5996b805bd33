package persist

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/toolhost/toolhost/tools"
)

// compact rewrites the journal with only what a later holder needs, on
// the journal's compactor goroutine. Appends go on meanwhile: the bulk is
// read and rewritten without the lock, and only what was appended since
// is copied under it, before the rename. A compaction that fails leaves
// the journal as it was, and the next is tried after as many written
// toolResults again; one that finds the journal closed gives up, and one
// that ends with the journal over its bound again starts over.
func (j *journal) compact() {
	for {
		err := j.compactOnce()
		j.mu.Lock()
		// Records keep coming while a compaction runs; so many may have
		// come that the journal is over its bound again.
		if err == nil && j.f != nil && j.nWritten > j.keep+j.keep/4 {
			j.mu.Unlock()
			continue
		}
		j.compacting = false
		if err != nil {
			j.nWritten = 0
		}
		j.mu.Unlock()
		return
	}
}

// compactOnce does compact's work: the temporary file beside the journal
// is synced, renamed over it, and the directory synced, as the tombstone
// is written.
func (j *journal) compactOnce() (err error) {
	j.mu.Lock()
	upTo := j.size
	j.mu.Unlock()
	bulk, err := readPrefix(j.path, 0, upTo)
	if err != nil {
		return err
	}
	kept, nWritten, err := compactRecords(bulk, j.keep)
	if err != nil {
		return err
	}
	dir := filepath.Dir(j.path)
	tmp, err := os.CreateTemp(dir, ".compact-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(kept); err != nil {
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		return err
	}

	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return os.ErrClosed // closed or ended meanwhile
	}
	tail, err := readPrefix(j.path, upTo, j.size)
	if err != nil {
		return err
	}
	if _, err := tmp.Write(tail); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), j.path); err != nil {
		return err
	}
	syncDir(dir)
	f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		// The compacted journal is in place; appends cannot reach it.
		j.f.Close()
		j.f = nil
		return err
	}
	j.f.Close()
	j.f = f
	j.size = int64(len(kept) + len(tail))
	j.nWritten = nWritten + bytes.Count(tail, []byte(`{"kind":"written"`))
	return nil
}

// readPrefix reads the bytes [from, to) of the file at path.
func readPrefix(path string, from, to int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, to-from)
	if _, err := io.ReadFull(io.NewSectionReader(f, from, to-from), b); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// syncDir syncs a directory, so that a rename in it is durable; an error
// costs durability only, as it would on a filesystem without it.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// compactRecords returns the lines of the journal b that a later holder
// needs, verbatim and in their order, and how many written toolResults
// they keep. It keeps:
//   - the session record and every holder record (what a dead holder's
//     commands could leave behind);
//   - every toolResult not yet written to a connection, and the keep
//     written ones of highest seq, each with its written record;
//   - the handle records of handles without a toolResult (running: a
//     later holder ends them "lost"), and of the toolResults kept;
//   - the highest-numbered handle and its toolResult, whatever its age,
//     so that a later holder numbers new handles after it.
//
// A torn line (only the last can be) is dropped; it was never a record.
func compactRecords(b []byte, keep int) ([]byte, int, error) {
	type line struct {
		raw []byte // with its newline
		r   record
	}
	var lines []line
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			break // torn
		}
		raw := b[:i+1]
		b = b[i+1:]
		var r record
		if json.Unmarshal(raw, &r) != nil {
			continue
		}
		lines = append(lines, line{raw: raw, r: r})
	}
	if len(lines) == 0 || lines[0].r.Kind != "session" || lines[0].r.V != journalVersion {
		return nil, 0, fmt.Errorf("not a version %d session journal: %w", journalVersion, errJournalVersion)
	}

	resultOf := map[string]int64{} // handle id → the seq of its toolResult
	handleOf := map[int64]string{} // seq → the handle id of its toolResult
	written := map[int64]bool{}
	var maxHandle string
	var maxNumber uint64
	for _, l := range lines[1:] {
		switch l.r.Kind {
		case "result":
			id := resultHandle(l.r.Message)
			handleOf[l.r.Seq] = id
			if id != "" {
				resultOf[id] = l.r.Seq
			}
		case "written":
			written[l.r.Seq] = true
		case "handle":
			if l.r.Handle != nil {
				if n := handleNumber(*l.r.Handle); maxHandle == "" || n >= maxNumber {
					maxHandle, maxNumber = l.r.Handle.HandleID, n
				}
			}
		}
	}
	var writtenSeqs []int64
	for seq := range handleOf {
		if written[seq] {
			writtenSeqs = append(writtenSeqs, seq)
		}
	}
	slices.Sort(writtenSeqs)
	keptSeq := map[int64]bool{}
	for seq := range handleOf {
		keptSeq[seq] = !written[seq] // every one not yet written
	}
	for _, seq := range writtenSeqs[max(0, len(writtenSeqs)-keep):] {
		keptSeq[seq] = true
	}
	if seq, ok := resultOf[maxHandle]; ok && maxHandle != "" {
		keptSeq[seq] = true
	}

	var out bytes.Buffer
	out.Write(lines[0].raw)
	nWritten := 0
	wroteWritten := map[int64]bool{}
	for _, l := range lines[1:] {
		switch l.r.Kind {
		case "holder":
			out.Write(l.raw)
		case "handle":
			if l.r.Handle == nil {
				continue
			}
			seq, ended := resultOf[l.r.Handle.HandleID]
			if !ended || keptSeq[seq] || l.r.Handle.HandleID == maxHandle {
				out.Write(l.raw)
			}
		case "result":
			if keptSeq[l.r.Seq] {
				out.Write(l.raw)
			}
		case "written":
			if keptSeq[l.r.Seq] && !wroteWritten[l.r.Seq] {
				wroteWritten[l.r.Seq] = true
				nWritten++
				out.Write(l.raw)
			}
		}
	}
	return out.Bytes(), nWritten, nil
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

// handleNumber returns the highest N of a handle's ids ("h-N", "c-N").
func handleNumber(hs tools.HandleStarted) uint64 {
	var n uint64
	for _, id := range []string{hs.HandleID, hs.CommandID} {
		var v uint64
		if _, err := fmt.Sscanf(id[strings.IndexByte(id, '-')+1:], "%d", &v); err == nil {
			n = max(n, v)
		}
	}
	return n
}
