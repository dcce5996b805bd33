package mounts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolhost/toolhost/internal/parallel"
	"github.com/toolhost/toolhost/objstore"
)

// Limits bound what a mount fetches. A zero field takes its default.
type Limits struct {
	// MaxObjects is the most objects a listing may have (default
	// 100,000).
	MaxObjects int
	// MaxBytes is the most bytes a listing's objects may add up to
	// (default 2 GiB).
	MaxBytes int64
	// Workers is how many objects are fetched or written back at once
	// (default 8).
	Workers int
}

// The default Limits.
const (
	DefaultMaxObjects = 100_000
	DefaultMaxBytes   = 2 << 30
	DefaultWorkers    = 8
)

func (l Limits) withDefaults() Limits {
	if l.MaxObjects <= 0 {
		l.MaxObjects = DefaultMaxObjects
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.Workers <= 0 {
		l.Workers = DefaultWorkers
	}
	return l
}

// Refusal is a local file a write-back did not upload, and why.
type Refusal struct {
	Path   string `json:"path"`   // relative to the mount; a directory's ends in "/"
	Reason string `json:"reason"` // in words
}

// Result is what a write-back did.
type Result struct {
	// Uploaded and Deleted count the objects written and deleted.
	Uploaded, Deleted int
	// Conflicts are the paths (relative to the mount) whose object
	// changed in the bucket since it was fetched: the bucket's object
	// stays, and so does the local file.
	Conflicts []string
	// NotUploaded are what an object store cannot hold: symlinks,
	// special files, empty directories.
	NotUploaded []Refusal
}

// State is a mount's state, for the mounts method.
type State struct {
	Name     string
	Kind     string
	URI      string
	Path     string
	ReadOnly bool
	// Objects and Bytes are the files shown (the last listing's, for a
	// read-only mount; those fetched or written back, for a writable
	// one).
	Objects int
	Bytes   int64
	// LastSync is when the last Prepare or WriteBack succeeded.
	LastSync time.Time
	// Skipped are the keys the last listing had that cannot be files
	// (see doc.go); they are never deleted by a write-back.
	Skipped []string
	// Conflicts and NotUploaded are the last write-back's.
	Conflicts   []string
	NotUploaded []Refusal
	// Views counts the read-only views that commands are using.
	Views int
	// Err is the last Prepare's or WriteBack's error, if it failed.
	Err string
}

// The names under a mount's directory.
const (
	objectsDir = "objects" // read-only: the cache's object files, by id
	viewsDir   = "views"   // read-only: the views, one per listing
	workDir    = "work"    // writable: the working directory
	stagingDir = "staging" // fetches in progress
)

// Mount is one mount's cache: the bucket's objects under the URI's
// prefix as files in a directory the caller owns. Its methods are safe
// for concurrent use: Prepare and WriteBack run one at a time.
type Mount struct {
	spec   Spec
	store  objstore.Store
	dir    string
	prefix string // the listed prefix: "" or ending in "/"
	lim    Limits

	// op serializes Prepare and WriteBack; it is held across their
	// requests to the store. It guards rec and the files under dir,
	// except the views, which mu guards.
	op  sync.Mutex
	rec *record

	mu       sync.Mutex       // guards the fields below; held over no request
	views    map[string]*view // live read-only views, by path
	current  *view            // the newest view; nil before the first Prepare
	nextView int              // the number of the next view's directory
	workRefs int              // commands using the working directory (Prepare's minus Release's)
	state    State
}

// view is a read-only mount's directory for one listing: object files
// hard-linked under their paths. It never changes once published, and is
// removed when no command uses it and a newer one is current.
type view struct {
	path string
	fp   string // its listing's fingerprint
	refs int    // commands using it (Prepare's minus Release's)
}

// New returns the mount of spec on store, its cache in dir (created
// 0700 if missing; the caller owns it, outside every root, and keeps
// other processes out of it). Views left by an earlier process are
// removed; the record of fetched objects is read back, and not trusted
// beyond what it can check: a corrupt one starts the cache clean.
func New(spec Spec, store objstore.Store, dir string, lim Limits) (*Mount, error) {
	if err := spec.Check(); err != nil {
		return nil, mountErr(spec, err)
	}
	_, _, prefix, err := ParseURI(spec.URI)
	if err != nil {
		return nil, mountErr(spec, err)
	}
	m := &Mount{
		spec: spec, store: store, dir: dir, prefix: prefix, lim: lim.withDefaults(),
		views: map[string]*view{},
		state: State{Name: spec.Name, Kind: spec.Kind, URI: spec.URI, Path: spec.Path, ReadOnly: spec.ReadOnly},
	}
	if err := m.open(); err != nil {
		return nil, mountErr(spec, fmt.Errorf("cache %s: %w", dir, err))
	}
	return m, nil
}

// open readies dir: its subdirectories, and the record checked against
// what is on disk.
func (m *Mount) open() error {
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(m.dir, 0o700); err != nil {
		return err
	}
	for _, d := range []string{viewsDir, stagingDir} {
		if err := os.RemoveAll(filepath.Join(m.dir, d)); err != nil {
			return err
		}
	}
	for _, d := range []string{objectsDir, viewsDir, stagingDir} {
		if err := os.Mkdir(filepath.Join(m.dir, d), 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	rec := loadRecord(m.dir, m.spec, m.prefix)
	if rec == nil {
		// No record to trust, or another bucket's: the cache starts
		// clean, and a working directory, which may hold changes never
		// written back, is kept aside, never shown or uploaded.
		work := filepath.Join(m.dir, workDir)
		if _, err := os.Lstat(work); err == nil {
			aside := filepath.Join(m.dir, "work-previous-"+strconv.FormatInt(time.Now().UnixNano(), 10))
			if err := os.Rename(work, aside); err != nil {
				return err
			}
		}
		rec = newRecord(m.spec)
	}
	// The cache holds what the record names, whole; the rest goes. A
	// cache written in another boot without a sync may hold parts of
	// files that a power loss left: it all goes.
	if rec.CacheBoot != "" && rec.CacheBoot != bootID() {
		clear(rec.Cache)
	}
	ents, err := os.ReadDir(filepath.Join(m.dir, objectsDir))
	if err != nil {
		return err
	}
	onDisk := map[string]bool{}
	for _, e := range ents {
		p := filepath.Join(m.dir, objectsDir, e.Name())
		ce, ok := rec.Cache[e.Name()]
		if fi, err := os.Lstat(p); !ok || err != nil || !fi.Mode().IsRegular() || fi.Size() != ce.Size {
			os.RemoveAll(p)
			continue
		}
		onDisk[e.Name()] = true
	}
	for id := range rec.Cache {
		if !onDisk[id] {
			delete(rec.Cache, id)
		}
	}
	m.rec = rec
	m.state.LastSync = rec.LastSync
	return nil
}

// Prepare readies the mount for a command about to start, and returns
// the directory to show it at the mount's path: the objects under the
// prefix as the bucket has them now. It lists the prefix once, refuses
// a listing over the limits before fetching anything, fetches what
// changed (in parallel, into staging) and publishes it only when all of
// it has come: on an error the command must not start, and what was
// shown before is unchanged.
//
// A read-only mount's directory is a view that does not change while a
// command uses it; the caller gives it back with Release. An unchanged
// bucket costs one LIST: the current view is shown again. A writable
// mount's directory is its working directory, the same for every
// command: its files that the bucket changed and the command did not are
// refreshed, and its local changes are kept. Commands that share a
// writable mount see each other's changes: while one uses it (Prepare
// without Release), a Prepare shows it as it is, without a listing, so
// that nothing is replaced under a command that writes.
func (m *Mount) Prepare(ctx context.Context) (string, error) {
	m.op.Lock()
	defer m.op.Unlock()
	if !m.spec.ReadOnly {
		m.mu.Lock()
		inUse := m.workRefs > 0
		if inUse {
			m.workRefs++
		}
		m.mu.Unlock()
		if inUse {
			// A command is writing the working directory: it is shown
			// as it is, never refreshed under that command.
			return filepath.Join(m.dir, workDir), nil
		}
	}
	var dir string
	var err error
	// An object written between the listing and its fetch is a
	// precondition failure: list again, a few times.
	for range 3 {
		var l *listing
		l, err = m.list(ctx)
		if err != nil {
			break
		}
		if m.spec.ReadOnly {
			dir, err = m.prepareView(ctx, l)
		} else {
			dir, err = m.prepareWork(ctx, l)
		}
		if !errors.Is(err, objstore.ErrPrecondition) || ctx.Err() != nil {
			break
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.state.Err = err.Error()
		return "", mountErr(m.spec, err)
	}
	m.state.Err = ""
	if !m.spec.ReadOnly {
		m.workRefs++
	}
	return dir, nil
}

// prepareView makes the read-only view of l, or shows the current one
// again when l is what it shows.
func (m *Mount) prepareView(ctx context.Context, l *listing) (string, error) {
	fp := l.fingerprint()
	now := time.Now()
	m.mu.Lock()
	if v := m.current; v != nil && v.fp == fp {
		v.refs++
		m.noteListing(l, now)
		m.mu.Unlock()
		return v.path, nil
	}
	m.mu.Unlock()

	objects := filepath.Join(m.dir, objectsDir)
	var need []file
	for _, f := range l.files {
		if _, ok := m.rec.Cache[objectID(f.Key, f.Version)]; !ok {
			need = append(need, f)
		}
	}
	var fetched atomic.Int64
	var recMu sync.Mutex
	err := m.parallel(ctx, len(need), func(ctx context.Context, i int) error {
		f := need[i]
		id := objectID(f.Key, f.Version)
		tmp, _, err := m.fetch(ctx, f.Object, 0o444, false)
		if err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(objects, id)); err != nil {
			os.Remove(tmp)
			return err
		}
		recMu.Lock()
		m.rec.Cache[id] = cacheEntry{Key: f.Key, Version: f.Version, Size: f.Size}
		recMu.Unlock()
		fetched.Add(1)
		return nil
	})
	if err != nil {
		// What came is whole in the cache; the record says so, so that
		// the next Prepare fetches the rest only.
		if fetched.Load() > 0 && m.cacheDurable(true) == nil {
			m.rec.save(m.dir)
		}
		return "", err
	}

	// Link the view in a directory of its own, then publish it whole.
	m.mu.Lock()
	n := m.nextView
	m.nextView++
	m.mu.Unlock()
	final := filepath.Join(m.dir, viewsDir, strconv.Itoa(n))
	tmp := filepath.Join(m.dir, viewsDir, ".tmp-"+strconv.Itoa(n))
	if err := buildView(tmp, objects, l); err != nil {
		os.RemoveAll(tmp)
		// A cache file gone from under the record (removed by hand) is
		// fetched again by the next Prepare.
		for id, e := range m.rec.Cache {
			if fi, err := os.Lstat(filepath.Join(objects, id)); err != nil || fi.Size() != e.Size {
				delete(m.rec.Cache, id)
			}
		}
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}

	// The cache keeps this listing's objects: older views hold their
	// own links to theirs.
	keep := make(map[string]bool, len(l.files))
	for _, f := range l.files {
		keep[objectID(f.Key, f.Version)] = true
	}
	for id := range m.rec.Cache {
		if !keep[id] {
			os.Remove(filepath.Join(objects, id))
			delete(m.rec.Cache, id)
		}
	}
	if err := m.cacheDurable(fetched.Load() > 0); err != nil {
		return "", err
	}
	m.rec.LastSync = now
	if err := m.rec.save(m.dir); err != nil {
		return "", err
	}

	var old *view
	m.mu.Lock()
	if m.current != nil && m.current.refs == 0 {
		old = m.current
		delete(m.views, old.path)
	}
	v := &view{path: final, fp: fp, refs: 1}
	m.views[final] = v
	m.current = v
	m.noteListing(l, now)
	m.mu.Unlock()
	if old != nil {
		os.RemoveAll(old.path)
	}
	return final, nil
}

// cacheDurable makes the read-only cache's files safe for the record to
// name, when fetched says there are new ones. Where the boot has an id
// (Linux), nothing is synced: the record names the boot, and a cache
// from another boot (after a crash of the machine, which may have lost
// what was not written out) is not trusted. Elsewhere the filesystem is
// synced.
func (m *Mount) cacheDurable(fetched bool) error {
	if id := bootID(); id != "" {
		m.rec.CacheBoot = id
		return nil
	}
	if fetched {
		if err := syncFS(filepath.Join(m.dir, objectsDir)); err != nil {
			return err
		}
	}
	m.rec.CacheBoot = ""
	return nil
}

// buildView links l's files from the cache objects into the new
// directory dir, under their paths, with l's directories.
func buildView(dir, objects string, l *listing) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	made := map[string]bool{"": true}
	var mkdir func(rel string) error
	mkdir = func(rel string) error {
		if made[rel] {
			return nil
		}
		parent := ""
		if i := strings.LastIndexByte(rel, '/'); i >= 0 {
			parent = rel[:i]
		}
		if err := mkdir(parent); err != nil {
			return err
		}
		if err := os.Mkdir(filepath.Join(dir, filepath.FromSlash(rel)), 0o755); err != nil {
			return err
		}
		made[rel] = true
		return nil
	}
	for _, d := range l.dirs {
		if err := mkdir(d); err != nil {
			return err
		}
	}
	for _, f := range l.files {
		parent := ""
		if i := strings.LastIndexByte(f.Rel, '/'); i >= 0 {
			parent = f.Rel[:i]
		}
		if err := mkdir(parent); err != nil {
			return err
		}
		if err := os.Link(filepath.Join(objects, objectID(f.Key, f.Version)), filepath.Join(dir, filepath.FromSlash(f.Rel))); err != nil {
			return err
		}
	}
	return nil
}

// noteListing records l in the state. m.mu is held.
func (m *Mount) noteListing(l *listing, at time.Time) {
	if m.spec.ReadOnly {
		m.state.Objects = len(l.files)
		m.state.Bytes = l.bytes
	}
	m.state.Skipped = l.skipped
	m.state.LastSync = at
}

// Release gives back the directory that Prepare returned, when the
// command it was shown to has ended. A view no command uses is removed
// once a newer one is current; a writable mount's working directory is
// refreshed by a Prepare only while no command uses it.
func (m *Mount) Release(dir string) {
	m.mu.Lock()
	if !m.spec.ReadOnly {
		if dir == filepath.Join(m.dir, workDir) && m.workRefs > 0 {
			m.workRefs--
		}
		m.mu.Unlock()
		return
	}
	v, ok := m.views[dir]
	if !ok || v.refs == 0 {
		m.mu.Unlock()
		return
	}
	v.refs--
	remove := v.refs == 0 && v != m.current
	if remove {
		delete(m.views, dir)
	}
	m.mu.Unlock()
	if remove {
		os.RemoveAll(dir)
	}
}

// State returns the mount's state.
func (m *Mount) State() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.state
	s.Skipped = slices.Clone(s.Skipped)
	s.Conflicts = slices.Clone(s.Conflicts)
	s.NotUploaded = slices.Clone(s.NotUploaded)
	for _, v := range m.views {
		if v.refs > 0 {
			s.Views++
		}
	}
	return s
}

// fetch writes the object o into a new file in staging, whole, with
// perm and o's ModTime, and returns its name and, when sum, its SHA-256.
// It never holds more of the object than a buffer.
func (m *Mount) fetch(ctx context.Context, o objstore.Object, perm os.FileMode, sum bool) (path string, sha string, err error) {
	rc, _, err := m.store.Open(ctx, o.Key, o.Version)
	if err != nil {
		return "", "", err
	}
	defer rc.Close()
	f, err := os.CreateTemp(filepath.Join(m.dir, stagingDir), "obj-*")
	if err != nil {
		return "", "", err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	var w io.Writer = f
	var h hash.Hash
	if sum {
		h = sha256.New()
		w = io.MultiWriter(f, h)
	}
	bp := bufPool.Get().(*[]byte)
	n, err := copyFull(w, rc, *bp)
	bufPool.Put(bp)
	if err != nil {
		var oe *objstore.Error
		if errors.As(err, &oe) {
			return "", "", err
		}
		return "", "", fmt.Errorf("get %s: %w", o.Key, err)
	}
	if n != o.Size {
		return "", "", fmt.Errorf("get %s: %d bytes came of %d", o.Key, n, o.Size)
	}
	if err := f.Chmod(perm); err != nil {
		return "", "", err
	}
	if err := f.Close(); err != nil {
		return "", "", err
	}
	if !o.ModTime.IsZero() {
		os.Chtimes(f.Name(), time.Time{}, o.ModTime)
	}
	if h != nil {
		sha = hex.EncodeToString(h.Sum(nil))
	}
	return f.Name(), sha, nil
}

// bufPool holds fetch's copy buffers.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

// copyFull copies r to w, writing half of buf at a time (the last write
// may be shorter) while the other half is read. A body read as it
// arrives comes in pieces, and a file written in small pieces reads back
// slower from the page cache (ext4 keeps it in smaller folios): the bench
// measured a mount's files, written as 256 KiB reads came, at 0.79× a
// file written whole (0.9× wanted), and at 0.93× written 512 KiB at a
// time. A read that waited for each write halved the fetch, and larger
// pieces, which leave the CPU's cache before they are written, cost a
// quarter of it: with two halves of 512 KiB the fetch ran at 1.14× a
// plain GET loop.
//
// A write that fails closes r, so that a reader blocked on a stalled
// body ends at once; copyFull returns once its reader has.
func copyFull(w io.Writer, r io.ReadCloser, buf []byte) (int64, error) {
	half := len(buf) / 2
	bufs := [2][]byte{buf[:half:half], buf[half:]}
	type piece struct {
		b   []byte
		err error
	}
	full := make(chan piece, 1)
	free := make(chan []byte, 2)
	free <- bufs[0]
	free <- bufs[1]
	stop := make(chan struct{})
	done := make(chan struct{})
	// The reader is owned by copyFull, which waits for it (done) before
	// it returns.
	go func() {
		defer close(done)
		for {
			var b []byte
			select {
			case b = <-free:
			case <-stop:
				return
			}
			k, err := io.ReadFull(r, b)
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				err = io.EOF
			}
			select {
			case full <- piece{b[:k], err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() { close(stop); <-done }()
	var n int64
	for p := range full {
		if len(p.b) > 0 {
			if _, err := w.Write(p.b); err != nil {
				r.Close()
				return n, err
			}
			n += int64(len(p.b))
		}
		if p.err == io.EOF {
			return n, nil
		}
		if p.err != nil {
			return n, p.err
		}
		free <- p.b[:cap(p.b)]
	}
	return n, nil
}

// parallel runs fn for 0..n-1 on m's workers, and returns the first
// error; the first error cancels the others' ctx. It returns when every
// call has.
func (m *Mount) parallel(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	if n == 0 {
		return nil
	}
	return parallel.For(ctx, m.lim.Workers, n, fn)
}
