package mounts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/objstore"
)

// fetchJob is a file of a writable mount that Prepare fetches.
type fetchJob struct {
	file
	adopt  bool   // a local file the record does not know is there: kept, and recorded only if it equals the object
	staged string // the fetched file, in staging
	sha    string // its SHA-256
}

// prepareWork brings the working directory up to the listing l: files
// the bucket changed or added and the working directory did not touch are
// fetched, files it deleted are removed, and every local change is kept.
func (m *Mount) prepareWork(ctx context.Context, l *listing) (string, error) {
	now := time.Now()
	work := filepath.Join(m.dir, workDir)
	if err := os.Mkdir(work, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	var jobs []*fetchJob
	listed := make(map[string]bool, len(l.files))
	for _, f := range l.files {
		listed[f.Key] = true
		e := m.rec.Files[f.Key]
		if e != nil && e.Version == f.Version {
			continue // as fetched; any local change is the command's
		}
		fi, err := os.Lstat(filepath.Join(work, filepath.FromSlash(f.Rel)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Missing, or deleted here while the bucket changed it:
			// nothing local to keep, so the bucket's comes.
			jobs = append(jobs, &fetchJob{file: f})
		case err != nil && !errors.Is(err, syscall.ENOTDIR):
			return "", err
		case err != nil:
			// A parent is a file here: the local change wins.
		case e != nil && stampOf(fi) == e.Stamp:
			jobs = append(jobs, &fetchJob{file: f}) // unchanged here: refreshed
		case e == nil && fi.Mode().IsRegular():
			jobs = append(jobs, &fetchJob{file: f, adopt: true})
		}
		// Otherwise changed here too: kept, a conflict at write-back.
	}
	err := m.parallel(ctx, len(jobs), func(ctx context.Context, i int) error {
		j := jobs[i]
		var err error
		j.staged, j.sha, err = m.fetch(ctx, j.Object, 0o644, true)
		return err
	})
	if err != nil {
		for _, j := range jobs {
			if j.staged != "" {
				os.Remove(j.staged)
			}
		}
		return "", err
	}

	// Publish: every fetch has come.
	for _, j := range jobs {
		p := filepath.Join(work, filepath.FromSlash(j.Rel))
		if j.adopt {
			os.Remove(j.staged)
			if sha, fi, err := hashFile(p); err == nil && sha == j.sha {
				m.rec.Files[j.Key] = &fileEntry{Version: j.Version, Stamp: stampOf(fi), SHA256: sha}
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			os.Remove(j.staged)
			continue // a parent is a file here: the local change wins
		}
		if err := os.Rename(j.staged, p); err != nil {
			os.Remove(j.staged)
			continue // a directory here: the local change wins
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return "", err
		}
		m.rec.Files[j.Key] = &fileEntry{Version: j.Version, Stamp: stampOf(fi), SHA256: j.sha}
	}
	// Objects gone from the bucket go from here, unless changed here.
	changed := len(jobs) > 0 || !slices.Equal(m.rec.Dirs, l.dirs)
	for key, e := range m.rec.Files {
		if listed[key] {
			continue
		}
		p := filepath.Join(work, filepath.FromSlash(key[len(m.prefix):]))
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
			delete(m.rec.Files, key)
			changed = true
		case stampOf(fi) == e.Stamp:
			if err := os.Remove(p); err != nil {
				return "", err
			}
			delete(m.rec.Files, key)
			changed = true
			removeEmptyParents(work, filepath.Dir(p))
		}
	}
	for _, d := range l.dirs {
		os.MkdirAll(filepath.Join(work, filepath.FromSlash(d)), 0o755)
	}
	m.rec.Dirs = l.dirs
	if len(jobs) > 0 {
		if err := syncFS(work); err != nil {
			return "", err
		}
	}
	if changed {
		m.rec.LastSync = now
		if err := m.rec.save(m.dir); err != nil {
			return "", err
		}
	}
	m.mu.Lock()
	m.noteListing(l, now)
	m.noteFiles()
	m.mu.Unlock()
	return work, nil
}

// noteFiles records the writable mount's files in the state. m.mu is
// held, and m.op.
func (m *Mount) noteFiles() {
	m.state.Objects = len(m.rec.Files)
	m.state.Bytes = 0
	for _, e := range m.rec.Files {
		m.state.Bytes += e.Stamp.Size
	}
}

// removeEmptyParents removes dir and its parents up to work while they
// are empty.
func removeEmptyParents(work, dir string) {
	for dir != work && strings.HasPrefix(dir, work+string(filepath.Separator)) {
		if os.Remove(dir) != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// hashFile returns the SHA-256 of the regular file p and its stat.
func hashFile(p string) (string, fs.FileInfo, error) {
	f, err := openNoFollow(p)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", nil, err
	}
	if !fi.Mode().IsRegular() {
		return "", nil, fmt.Errorf("%s is not a regular file", p)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", nil, err
	}
	return hex.EncodeToString(h.Sum(nil)), fi, nil
}

// writeJob is a local change that WriteBack writes to the bucket.
type writeJob struct {
	key, rel string
	e        *fileEntry // what was fetched; nil for a new file
	del      bool       // deleted here
}

// WriteBack writes a writable mount's local changes to the bucket:
// changed and new files are uploaded, deleted ones deleted, each only if
// the bucket's object is still the one fetched (a Head just before,
// and a conditional write). An object the bucket changed is a conflict:
// it stays, the local file stays, and Result.Conflicts names it. What an
// object store cannot hold is reported in Result.NotUploaded. After a
// write the record is the new object's, so that the next WriteBack
// uploads nothing. A read-only mount has nothing to write back.
//
// It is called when a command ends and on syncMount, never while a
// command writes the mount; it runs one at a time with Prepare.
func (m *Mount) WriteBack(ctx context.Context) (Result, error) {
	if m.spec.ReadOnly {
		return Result{}, nil
	}
	m.op.Lock()
	defer m.op.Unlock()
	res, err := m.writeBack(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.noteFiles()
	m.state.Conflicts = slices.Clone(res.Conflicts)
	m.state.NotUploaded = slices.Clone(res.NotUploaded)
	if err != nil {
		m.state.Err = err.Error()
		return res, mountErr(m.spec, err)
	}
	m.state.Err = ""
	m.state.LastSync = m.rec.LastSync
	return res, nil
}

func (m *Mount) writeBack(ctx context.Context) (Result, error) {
	var res Result
	work := filepath.Join(m.dir, workDir)
	if _, err := os.Lstat(work); errors.Is(err, fs.ErrNotExist) {
		return res, nil // never prepared: nothing written
	}
	markers := map[string]bool{}
	for _, d := range m.rec.Dirs {
		markers[d] = true
	}
	var jobs []*writeJob
	seen := map[string]bool{}
	children := map[string]int{} // a directory's entries, by its rel
	var dirs []string
	err := filepath.WalkDir(work, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == work {
			return nil
		}
		rel := filepath.ToSlash(p[len(work)+1:])
		parent := ""
		if i := strings.LastIndexByte(rel, '/'); i >= 0 {
			parent = rel[:i]
		}
		children[parent]++
		key := m.prefix + rel
		switch t := d.Type(); {
		case t.IsDir():
			dirs = append(dirs, rel)
			return nil
		case t&fs.ModeSymlink != 0:
			seen[key] = true
			res.NotUploaded = append(res.NotUploaded, Refusal{Path: rel, Reason: "a symlink: an object store holds no links"})
			return nil
		case !t.IsRegular():
			seen[key] = true
			res.NotUploaded = append(res.NotUploaded, Refusal{Path: rel, Reason: "a special file (" + t.String() + "): an object store holds files only"})
			return nil
		}
		seen[key] = true
		e := m.rec.Files[key]
		if e != nil {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			st := stampOf(fi)
			if st == e.Stamp {
				return nil
			}
			if st.Size == e.Stamp.Size {
				// Touched, perhaps not changed: the content says.
				if sha, fi, err := hashFile(p); err == nil && sha == e.SHA256 {
					e.Stamp = stampOf(fi)
					return nil
				}
			}
		}
		jobs = append(jobs, &writeJob{key: key, rel: rel, e: e})
		return nil
	})
	if err != nil {
		return res, err
	}
	// A directory that held a fetched file and is empty now was emptied
	// by deletes: its objects' deletion says all, and it is removed
	// below once they are gone. Only a directory made empty is refused.
	known := map[string]bool{}
	for key := range m.rec.Files {
		for rel := key[len(m.prefix):]; strings.Contains(rel, "/"); {
			rel = rel[:strings.LastIndexByte(rel, '/')]
			known[rel] = true
		}
	}
	for _, d := range dirs {
		if children[d] == 0 && !markers[d] && !known[d] {
			res.NotUploaded = append(res.NotUploaded, Refusal{Path: d + "/", Reason: "an empty directory: an object store holds no directories"})
		}
	}
	for key, e := range m.rec.Files {
		if !seen[key] {
			jobs = append(jobs, &writeJob{key: key, rel: key[len(m.prefix):], e: e, del: true})
		}
	}
	slices.SortFunc(jobs, func(a, b *writeJob) int { return strings.Compare(a.key, b.key) })

	var mu sync.Mutex // guards res and m.rec.Files while the jobs run
	err = m.parallel(ctx, len(jobs), func(ctx context.Context, i int) error {
		j := jobs[i]
		var e *fileEntry
		var conflict, deleted bool
		var err error
		if j.del {
			conflict, deleted, err = m.deleteObject(ctx, j)
		} else {
			e, conflict, err = m.putObject(ctx, filepath.Join(work, filepath.FromSlash(j.rel)), j)
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			return err
		case conflict:
			res.Conflicts = append(res.Conflicts, j.rel)
		case j.del:
			delete(m.rec.Files, j.key)
			if deleted {
				res.Deleted++
			}
		case e != nil:
			m.rec.Files[j.key] = e
			res.Uploaded++
		}
		return nil
	})
	if err == nil {
		// The directories the deletes emptied go too, deepest first, as
		// the bucket has none: the next command sees what the bucket
		// shows. A directory that is not empty stays.
		for i := len(dirs) - 1; i >= 0; i-- {
			if d := dirs[i]; known[d] && !markers[d] {
				_ = os.Remove(filepath.Join(work, filepath.FromSlash(d)))
			}
		}
	}
	slices.Sort(res.Conflicts)
	slices.SortFunc(res.NotUploaded, func(a, b Refusal) int { return strings.Compare(a.Path, b.Path) })
	if err == nil {
		m.rec.LastSync = time.Now()
	}
	if serr := m.rec.save(m.dir); err == nil {
		err = serr
	}
	return res, err
}

// putObject uploads the local file p as j's object if the bucket's is
// still the one fetched (or, for a new file, there is none), and returns
// the record of what was written; conflict says the bucket's changed.
func (m *Mount) putObject(ctx context.Context, p string, j *writeJob) (e *fileEntry, conflict bool, err error) {
	f, err := openNoFollow(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil // gone since the walk: the next write-back deletes it
		}
		return nil, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if !fi.Mode().IsRegular() {
		return nil, false, nil
	}
	st := stampOf(fi)
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, fi.Size())); err != nil {
		return nil, false, err
	}
	cond := objstore.Condition{IfNoneMatch: true}
	cur, err := m.store.Head(ctx, j.key)
	switch {
	case j.e == nil && err == nil:
		return nil, true, nil // created in the bucket too
	case j.e == nil && errors.Is(err, objstore.ErrNotFound):
	case j.e != nil && errors.Is(err, objstore.ErrNotFound):
		return nil, true, nil // deleted in the bucket
	case err != nil:
		return nil, false, err
	case cur.Version != j.e.Version:
		return nil, true, nil // changed in the bucket
	default:
		cond = objstore.Condition{IfMatch: j.e.Version}
	}
	obj, err := m.store.Put(ctx, j.key, f, fi.Size(), cond)
	if errors.Is(err, objstore.ErrPrecondition) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	return &fileEntry{Version: obj.Version, Stamp: st, SHA256: hex.EncodeToString(h.Sum(nil))}, false, nil
}

// deleteObject deletes j's object if the bucket's is still the one
// fetched; conflict says it changed, deleted that it was there to delete.
func (m *Mount) deleteObject(ctx context.Context, j *writeJob) (conflict, deleted bool, err error) {
	cur, err := m.store.Head(ctx, j.key)
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		return false, false, nil // gone already
	case err != nil:
		return false, false, err
	case cur.Version != j.e.Version:
		return true, false, nil
	}
	err = m.store.Delete(ctx, j.key, objstore.Condition{IfMatch: j.e.Version})
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		return false, false, nil
	case errors.Is(err, objstore.ErrPrecondition):
		return true, false, nil
	case err != nil:
		return false, false, err
	}
	return false, true, nil
}
