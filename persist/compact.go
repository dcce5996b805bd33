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

	"github.com/toolhost/toolhost/internal/fsutil"
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

// compactOnce does compact's work: the bulk of the journal is replayed,
// and what a later holder needs of it written again to a temporary file
// beside the journal, 0600, which is synced and renamed over it.
func (j *journal) compactOnce() error {
	j.mu.Lock()
	upTo := j.size
	j.mu.Unlock()
	bulk, err := readPrefix(j.path, 0, upTo)
	if err != nil {
		return err
	}
	rp, err := replayOf(j.path, bulk)
	if err != nil {
		return err
	}
	if rp.ended {
		return fmt.Errorf("%s: a tombstone, not a session's journal", j.path)
	}
	kept := rp.compacted(j.keep)
	var out bytes.Buffer
	for _, r := range kept.records() {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		out.Write(append(b, '\n'))
	}
	tmp, err := fsutil.CreateTemp(j.path, 0o600)
	if err != nil {
		return err
	}
	defer tmp.Discard()
	if _, err := tmp.Write(out.Bytes()); err != nil {
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
	if err := tmp.Commit(fsutil.SyncFile); err != nil {
		return err
	}
	// The rename is done: an error syncing the directory costs durability
	// only, as it would on a filesystem without it.
	_ = fsutil.SyncDir(filepath.Dir(j.path))
	f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		// The compacted journal is in place; appends cannot reach it.
		j.f.Close()
		j.f = nil
		return err
	}
	j.f.Close()
	j.f = f
	j.size = int64(out.Len() + len(tail))
	// The journal now replays to kept and the tail.
	_ = eachRecord(tail, func(r record) error {
		kept.apply(r)
		return nil
	})
	j.nWritten = kept.nWritten()
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

// compacted returns the part of rp that a later holder needs, to be
// written again in place of its journal (records). It keeps:
//   - the session record and every holder record (what a dead holder's
//     commands could leave behind);
//   - every toolResult not yet written to a connection, and the keep
//     written ones of highest seq, each with its written record;
//   - the handle records of handles without a toolResult (running: a
//     later holder ends them "lost"), and of the toolResults kept;
//   - the highest-numbered handle and its toolResult, whatever its age,
//     so that a later holder numbers new handles after it.
//
// It says what rp says of the holders, the running handles, the
// toolResults kept and the highest handle number.
func (rp *replay) compacted(keep int) *replay {
	resultOf := map[string]int64{} // handle id → the seq of its toolResult
	var writtenSeqs []int64
	for _, r := range rp.results {
		if r.handle != "" {
			resultOf[r.handle] = r.seq
		}
		if r.written {
			writtenSeqs = append(writtenSeqs, r.seq)
		}
	}
	var maxHandle string
	var maxNumber uint64
	for _, hs := range rp.handles {
		if n := handleNumber(hs); maxHandle == "" || n >= maxNumber {
			maxHandle, maxNumber = hs.HandleID, n
		}
	}
	keptSeq := map[int64]bool{}
	for _, r := range rp.results {
		keptSeq[r.seq] = !r.written // every one not yet written
	}
	slices.Sort(writtenSeqs)
	for _, seq := range writtenSeqs[max(0, len(writtenSeqs)-keep):] {
		keptSeq[seq] = true
	}
	if seq, ok := resultOf[maxHandle]; ok && maxHandle != "" {
		keptSeq[seq] = true
	}

	out := &replay{first: rp.first, holders: slices.Clone(rp.holders), holder: rp.holder, leftovers: slices.Clone(rp.leftovers), bySeq: map[int64]int{}}
	for _, hs := range rp.handles {
		seq, ended := resultOf[hs.HandleID]
		if !ended || keptSeq[seq] || hs.HandleID == maxHandle {
			out.handles = append(out.handles, hs)
		}
	}
	for _, r := range rp.results {
		if keptSeq[r.seq] {
			out.bySeq[r.seq] = len(out.results)
			out.results = append(out.results, r)
		}
	}
	return out
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
