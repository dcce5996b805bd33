package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolhost/toolhost/internal/fsutil"
)

// Options configure a Store.
type Options struct {
	// MaxBytes caps the store's blobs; 0 means 2 GiB.
	MaxBytes int64
	// Workers bounds the files hashed and copied at once; 0 means
	// GOMAXPROCS.
	Workers int
	// Logger gets what the store does; nil discards.
	Logger *slog.Logger
}

// DefaultMaxBytes is the cap when Options.MaxBytes is 0.
const DefaultMaxBytes = 2 << 30

// Store is a content-addressed snapshot store in one directory. Its methods
// are safe for concurrent use, and several processes may share the
// directory.
type Store struct {
	dir      string // absolute
	real     string // dir with symlinks resolved
	maxBytes int64
	workers  int
	log      *slog.Logger

	mu         sync.Mutex
	rootLocks  map[string]chan struct{}  // the in-process half of a root's lock
	statCaches map[string]*heldStatCache // by file path: the last read or written
	listings   map[string]dirListings    // by root key: the last whole scan's
	memos      map[string]treeMemos      // by root key: the last Take's
	memoSeeds  [2]maphash.Seed           // of every tree memo's fingerprint
	trees      treeCache                 // tree objects read and checked
	storeLock  sync.RWMutex              // the in-process half of the store's lock
	flushing   bool                      // a flushStatCaches is due
	closed     atomic.Bool
	closing    chan struct{} // closed by Close: flushStatCaches writes at once
	closeOnce  sync.Once
	bg         sync.WaitGroup // trash emptying and stat caches made after answers; Close waits

	packMu  sync.Mutex
	packs   map[hash32]packLoc     // every packed blob known; see pack.go
	packIDs map[string][]packEntry // the packs known, by id
	flusher sync.WaitGroup         // flushStatCaches; Close waits, after bg
}

// Info describes one snapshot.
type Info struct {
	ID, Label, Root string
	CreatedAt       time.Time
	// Files and Bytes count the regular files and their bytes; NewBytes are
	// the bytes the Take added to the store (new blobs and trees).
	Files           int
	Bytes, NewBytes int64
	Duration        time.Duration
}

// storeState is store.json: the format's version, the collection
// generation (bumped by each collection, so that a stat cache written before
// one checks that its blobs are still there) and the blobs' total size.
type storeState struct {
	Version    int    `json:"version"`
	Generation uint64 `json:"generation"`
	Bytes      int64  `json:"bytes"`
}

// storeVersion 2 added packs; a store of version 1 (loose blobs only) is
// upgraded when opened, so that older builds refuse it rather than miss
// its packed blobs.
const storeVersion = 2

// manifest is snapshots/<id>: one snapshot, written whole.
type manifest struct {
	Version    int       `json:"version"`
	ID         string    `json:"id"`
	Label      string    `json:"label,omitempty"`
	Root       string    `json:"root"`
	CreatedAt  time.Time `json:"createdAt"`
	Tree       string    `json:"tree"` // hex sha256 of the root's tree object
	Mode       uint32    `json:"mode"` // the root directory's 07777 bits
	Files      int       `json:"files"`
	Bytes      int64     `json:"bytes"`
	NewBytes   int64     `json:"newBytes"`
	DurationNS int64     `json:"durationNs"`
	Exclude    []string  `json:"exclude,omitempty"`
	Skip       []string  `json:"skip,omitempty"`
}

const manifestVersion = 1

func (m *manifest) info() Info {
	return Info{
		ID: m.ID, Label: m.Label, Root: m.Root, CreatedAt: m.CreatedAt,
		Files: m.Files, Bytes: m.Bytes, NewBytes: m.NewBytes,
		Duration: time.Duration(m.DurationNS),
	}
}

func (m *manifest) tree() (hash32, error) {
	var h hash32
	b, err := hex.DecodeString(m.Tree)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("%w: manifest %s: bad tree hash %q", ErrDamaged, m.ID, m.Tree)
	}
	copy(h[:], b)
	return h, nil
}

// Open opens (creating it 0700) the store in dir, which must be outside any
// root it snapshots.
func Open(dir string, opts Options) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("snapshot store %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("snapshot store: %w", err)
	}
	for _, sub := range []string{"blobs", "packs", "snapshots", "roots", "tmp", "trash"} {
		if err := os.Mkdir(filepath.Join(abs, sub), 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("snapshot store: %w", err)
		}
	}
	spreadSubdirs(filepath.Join(abs, "blobs"))
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("snapshot store: %w", err)
	}
	s := &Store{
		dir: abs, real: real,
		maxBytes:   opts.MaxBytes,
		workers:    opts.Workers,
		log:        opts.Logger,
		rootLocks:  map[string]chan struct{}{},
		statCaches: map[string]*heldStatCache{},
		listings:   map[string]dirListings{},
		memos:      map[string]treeMemos{},
		memoSeeds:  [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		closing:    make(chan struct{}),
		packs:      map[hash32]packLoc{},
		packIDs:    map[string][]packEntry{},
	}
	if s.maxBytes <= 0 {
		s.maxBytes = DefaultMaxBytes
	}
	if s.workers <= 0 {
		s.workers = runtime.GOMAXPROCS(0)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	unlock, err := s.lockStore(context.Background(), true)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if st, err := s.readState(); errors.Is(err, fs.ErrNotExist) {
		used, err := s.scanUsage()
		if err != nil {
			return nil, err
		}
		if err := s.writeState(storeState{Version: storeVersion, Bytes: used}); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	} else if st.Version < storeVersion {
		st.Version = storeVersion
		if err := s.writeState(st); err != nil {
			return nil, err
		}
	}
	s.clearTrash() // what crashed Restores left
	return s, nil
}

// rootHold is a Take's or Restore's hold on its root: the root's lock and
// a handle on it. Release ends both, unless later handed them to work
// that goes on after the answer.
type rootHold struct {
	unlock func()
	r      *os.Root
	key    string // the root's (rootKey)
}

// holdRoot takes the root's lock (the root checked by checkRoot: clean and
// real are its paths) and opens a handle on it. The caller releases the
// hold.
func (s *Store) holdRoot(ctx context.Context, clean, real string) (*rootHold, error) {
	key := rootKey(real)
	unlock, err := s.lockRoot(ctx, key)
	if err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(clean)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("%w: root %s: %v", ErrInvalid, clean, err)
	}
	return &rootHold{unlock: unlock, r: r, key: key}, nil
}

// release ends the hold, unless it was handed on.
func (h *rootHold) release() {
	if h.unlock != nil {
		h.r.Close()
		h.unlock()
	}
}

// later runs f after the answer, in the background, with the root's lock
// and handle handed over from h: the next Take or Restore of the root
// waits until f is done, and so does Close. A Take or Restore writes the
// root's stat cache this way, a cache its answer does not depend on.
func (s *Store) later(h *rootHold, f func(r *os.Root)) {
	unlock, r := h.unlock, h.r
	h.unlock = nil
	s.background(func() {
		defer unlock()
		defer r.Close()
		f(r)
	})
}

// scanCached scans the root r (whose key is key) through f while, on
// other goroutines of the caller's, the root's stat cache is loaded and
// beside runs (when not nil: a Restore reads the snapshot's trees). It
// returns once all are done, with the scanned tree and the stat cache
// (empty when it cannot be read: it is a cache, never the truth); an error
// of beside comes before the scan's. ph, when not nil, marks the scan's
// end as scanMs and, with beside, the end of both as loadMs.
func (s *Store) scanCached(ctx context.Context, r *os.Root, key string, f *filter, ph *phases, beside func() error) (*node, *statCache, error) {
	type loaded struct {
		c   *statCache
		err error
	}
	loadc := make(chan loaded, 1)
	go func() {
		var l loaded
		c, err := s.loadStatCache(s.statCachePath(key))
		if err != nil {
			s.log.Warn("snapshot stat cache ignored", "root", r.Name(), "err", err)
		}
		l.c = c
		if beside != nil {
			l.err = beside()
		}
		loadc <- l
	}()
	top, err := s.scan(ctx, r, key, f)
	ph.mark("scanMs")
	l := <-loadc
	if beside != nil {
		ph.mark("loadMs")
	}
	if l.err != nil {
		return nil, nil, l.err
	}
	if err != nil {
		return nil, nil, err
	}
	return top, l.c, nil
}

// phases times the steps of a Take or Restore for its log line.
type phases struct {
	start time.Time
	attrs []any
}

func newPhases() *phases { return &phases{start: time.Now()} }

// mark records the milliseconds since the start under name; nil ignores.
func (ph *phases) mark(name string) {
	if ph != nil {
		ph.attrs = append(ph.attrs, name, time.Since(ph.start).Milliseconds())
	}
}

// background runs f on a goroutine of the Store's, which Close waits for.
func (s *Store) background(f func()) {
	s.bg.Add(1)
	go func() { // owned by the Store: Close waits on s.bg
		defer s.bg.Done()
		f()
	}()
}

// Close marks the store closed, and waits until what Restores replaced
// has left the trash and the roots' stat caches are written; later calls
// fail with ErrClosed. The store holds nothing open between calls.
func (s *Store) Close() error {
	s.closed.Store(true)
	s.closeOnce.Do(func() { close(s.closing) })
	s.bg.Wait() // its last stat caches may start a flusher: waited for next
	s.flusher.Wait()
	return nil
}

func (s *Store) check() error {
	if s.closed.Load() {
		return ErrClosed
	}
	return nil
}

func (s *Store) readState() (storeState, error) {
	var st storeState
	data, err := os.ReadFile(filepath.Join(s.dir, "store.json"))
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("%w: store.json: %v", ErrDamaged, err)
	}
	if st.Version != storeVersion && st.Version != 1 {
		return st, fmt.Errorf("snapshot store %s has format version %d; this build knows %d", s.dir, st.Version, storeVersion)
	}
	return st, nil
}

func (s *Store) writeState(st storeState) error {
	data, _ := json.Marshal(st)
	return writeAtomic(filepath.Join(s.dir, "store.json"), append(data, '\n'), fsutil.SyncFileDir)
}

// scanUsage adds up the sizes of the blobs, loose and packed.
func (s *Store) scanUsage() (int64, error) {
	var total int64
	err := s.eachBlob(func(h hash32, path string, size int64) error {
		total += size
		return nil
	})
	if err != nil {
		return 0, err
	}
	if err := s.loadPacks(); err != nil {
		return 0, err
	}
	s.packMu.Lock()
	defer s.packMu.Unlock()
	for _, entries := range s.packIDs {
		for _, en := range entries {
			total += en.size
		}
	}
	return total, nil
}

// eachBlob calls f for every blob file, and removes the temporary files
// of blobs a crashed Take was writing: its callers hold the store's lock
// exclusively, so no Take is writing now.
func (s *Store) eachBlob(f func(h hash32, path string, size int64) error) error {
	blobs := filepath.Join(s.dir, "blobs")
	shards, err := os.ReadDir(blobs)
	if err != nil {
		return err
	}
	for _, sh := range shards {
		if !sh.IsDir() || len(sh.Name()) != 2 {
			continue
		}
		dir := filepath.Join(blobs, sh.Name())
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), tempBlobPrefix) {
				os.Remove(filepath.Join(dir, e.Name()))
				continue
			}
			var h hash32
			b, err := hex.DecodeString(sh.Name() + e.Name())
			if err != nil || len(b) != len(h) {
				continue
			}
			copy(h[:], b)
			fi, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			if err := f(h, filepath.Join(dir, e.Name()), fi.Size()); err != nil {
				return err
			}
		}
	}
	return nil
}

// testHookLockWait is called when a lock is busy, before waiting for it:
// with "root" for another goroutine's Take or Restore of the root, "flock"
// for another open file description's (another process's) flock.
var testHookLockWait func(what string)

// lockFile flocks path (fsutil.Lock), waiting for ctx; the returned func
// unlocks.
func lockFile(ctx context.Context, path string, exclusive bool) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("snapshot lock: %w", err)
	}
	err = fsutil.Lock(f, exclusive, false)
	if errors.Is(err, fsutil.ErrLocked) {
		if testHookLockWait != nil {
			testHookLockWait("flock")
		}
		done := make(chan error, 1)
		go func() { done <- fsutil.Lock(f, exclusive, true) }()
		select {
		case err = <-done:
		case <-ctx.Done():
			// The lock may still come: close the file once it does.
			go func() { <-done; f.Close() }()
			return nil, ctx.Err()
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("snapshot lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// lockStore takes the store's lock: shared while blobs are read (Restore,
// Diff, Export), exclusive while they are written or collected (Take's
// commit, Drop).
func (s *Store) lockStore(ctx context.Context, exclusive bool) (func(), error) {
	if exclusive {
		s.storeLock.Lock()
	} else {
		s.storeLock.RLock()
	}
	release := func() {
		if exclusive {
			s.storeLock.Unlock()
		} else {
			s.storeLock.RUnlock()
		}
	}
	unlock, err := lockFile(ctx, filepath.Join(s.dir, "lock"), exclusive)
	if err != nil {
		release()
		return nil, err
	}
	// Other processes add and remove packs under this lock, exclusively.
	if err := s.loadPacks(); err != nil {
		unlock()
		release()
		return nil, err
	}
	return func() { unlock(); release() }, nil
}

// rootKey names a root's directory under roots/: a hash of its real path.
func rootKey(real string) string {
	h := sha256.Sum256([]byte(real))
	return hex.EncodeToString(h[:16])
}

// lockRoot serializes Takes and Restores of one root: a channel in this
// process, an flock across processes.
func (s *Store) lockRoot(ctx context.Context, key string) (func(), error) {
	s.mu.Lock()
	ch := s.rootLocks[key]
	if ch == nil {
		ch = make(chan struct{}, 1)
		s.rootLocks[key] = ch
	}
	s.mu.Unlock()
	select {
	case ch <- struct{}{}:
	default:
		if testHookLockWait != nil {
			testHookLockWait("root")
		}
		select {
		case ch <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	dir := filepath.Join(s.dir, "roots", key)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		<-ch
		return nil, fmt.Errorf("snapshot store: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(dir, "lock"), true)
	if err != nil {
		<-ch
		return nil, err
	}
	return func() { unlock(); <-ch }, nil
}

// checkRoot validates a root: an absolute directory that neither holds the
// store nor lies inside it. It returns the cleaned path and the real one.
func (s *Store) checkRoot(root string) (clean, real string, err error) {
	if root == "" || !filepath.IsAbs(root) || strings.IndexByte(root, 0) >= 0 {
		return "", "", fmt.Errorf("%w: root %q is not an absolute path", ErrInvalid, root)
	}
	clean = filepath.Clean(root)
	real, err = filepath.EvalSymlinks(clean)
	if err != nil {
		return "", "", fmt.Errorf("%w: root %s: %v", ErrInvalid, clean, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", "", fmt.Errorf("%w: root %s: %v", ErrInvalid, clean, err)
	}
	if !fi.IsDir() {
		return "", "", fmt.Errorf("%w: root %s is not a directory", ErrInvalid, clean)
	}
	if within(real, s.real) || within(s.real, real) {
		return "", "", fmt.Errorf("%w: the snapshot store %s is inside the root %s, or the root inside it", ErrInvalid, s.dir, clean)
	}
	return clean, real, nil
}

// within reports whether p is dir or beneath it, on whole components.
func within(dir, p string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// sameRoot reports whether two roots are one directory.
func sameRoot(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}

// validID accepts what newID makes: letters, digits and dashes.
func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
			return false
		}
	}
	return true
}

func (s *Store) manifestPath(id string) string {
	return filepath.Join(s.dir, "snapshots", id)
}

func (s *Store) readManifest(id string) (*manifest, error) {
	if !validID(id) {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	data, err := os.ReadFile(s.manifestPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%w: manifest %s: %v", ErrDamaged, id, err)
	}
	if m.Version != manifestVersion {
		return nil, fmt.Errorf("%w: manifest %s has format version %d; this build knows %d", ErrDamaged, id, m.Version, manifestVersion)
	}
	if m.ID != id {
		return nil, fmt.Errorf("%w: manifest %s names itself %q", ErrDamaged, id, m.ID)
	}
	return &m, nil
}

// manifestIDs lists the snapshots' IDs (temporary files start with ".").
func (s *Store) manifestIDs() ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "snapshots"))
	if err != nil {
		return nil, fmt.Errorf("snapshot store: %w", err)
	}
	var ids []string
	for _, e := range ents {
		if validID(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// List returns the snapshots of root ("" for all), oldest first.
func (s *Store) List(root string) ([]Info, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	ids, err := s.manifestIDs()
	if err != nil {
		return nil, err
	}
	out := []Info{}
	for _, id := range ids {
		m, err := s.readManifest(id)
		if errors.Is(err, ErrNotFound) {
			continue // dropped meanwhile
		}
		if err != nil {
			return nil, err
		}
		if root == "" || sameRoot(m.Root, root) {
			out = append(out, m.info())
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// Get returns one snapshot's Info.
func (s *Store) Get(id string) (Info, error) {
	if err := s.check(); err != nil {
		return Info{}, err
	}
	m, err := s.readManifest(id)
	if err != nil {
		return Info{}, err
	}
	return m.info(), nil
}
