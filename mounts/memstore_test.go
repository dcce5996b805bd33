package mounts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolhost/toolhost/objstore"
	"github.com/toolhost/toolhost/objstore/storetest"
)

// memStore is an objstore.Store in memory for the tests: it honours
// conditions (unless ignoreConditions), gives every write a new version,
// counts requests, and lets a test inject failures.
type memStore struct {
	noBucket bool

	mu   sync.Mutex
	objs map[string]memObj // guarded by mu
	seq  int               // the last version given; guarded by mu

	// ignoreConditions is a store that ignores conditional writes, as
	// some S3-compatible ones do.
	ignoreConditions atomic.Bool

	// The requests made, by kind.
	lists, gets, heads, puts, deletes atomic.Int64

	hookMu sync.Mutex
	// afterList, when set, runs after a List has called its fn for every
	// object (an object changed between a listing and its fetch).
	afterList func()
	// drop, when set, says after how many bytes the body of key is cut
	// (a connection dropped mid-fetch); a negative number cuts nothing.
	drop func(key string) int64
	// beforePut, when set, runs before a Put's condition is checked (a
	// write racing the Head before it).
	beforePut func(key string)
	// fail, when set, is the error of every request it answers for.
	fail func(op, key string) error
}

type memObj struct {
	data    []byte
	version string
	mod     time.Time
}

func newMemStore() *memStore { return &memStore{objs: map[string]memObj{}} }

func (s *memStore) hooks() (afterList func(), drop func(string) int64, beforePut func(string), fail func(string, string) error) {
	s.hookMu.Lock()
	defer s.hookMu.Unlock()
	return s.afterList, s.drop, s.beforePut, s.fail
}

func (s *memStore) setHooks(f func(s *memStore)) {
	s.hookMu.Lock()
	defer s.hookMu.Unlock()
	f(s)
}

func (s *memStore) check(op, key string) error {
	if s.noBucket {
		return &objstore.Error{Op: op, Key: key, Status: 404, Code: "NoSuchBucket", Message: "The specified bucket does not exist", Err: objstore.ErrNoBucket}
	}
	if _, _, _, fail := s.hooks(); fail != nil {
		return fail(op, key)
	}
	return nil
}

func (s *memStore) List(ctx context.Context, prefix string, fn func(objstore.Object) error) error {
	s.lists.Add(1)
	if err := s.check("list", prefix); err != nil {
		return err
	}
	s.mu.Lock()
	var list []objstore.Object
	for k, o := range s.objs {
		if strings.HasPrefix(k, prefix) {
			list = append(list, objstore.Object{Key: k, Size: int64(len(o.data)), Version: o.version, ModTime: o.mod})
		}
	}
	s.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].Key < list[j].Key })
	for _, o := range list {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(o); err != nil {
			return err
		}
	}
	if after, _, _, _ := s.hooks(); after != nil {
		after()
	}
	return nil
}

func (s *memStore) Open(ctx context.Context, key, version string) (io.ReadCloser, objstore.Object, error) {
	s.gets.Add(1)
	if err := s.check("get", key); err != nil {
		return nil, objstore.Object{}, err
	}
	s.mu.Lock()
	o, ok := s.objs[key]
	s.mu.Unlock()
	switch {
	case !ok:
		return nil, objstore.Object{}, &objstore.Error{Op: "get", Key: key, Status: 404, Code: "NoSuchKey", Message: "The specified key does not exist.", Err: objstore.ErrNotFound}
	case version != "" && version != o.version:
		return nil, objstore.Object{}, &objstore.Error{Op: "get", Key: key, Status: 412, Code: "PreconditionFailed", Message: "At least one of the pre-conditions you specified did not hold", Err: objstore.ErrPrecondition}
	}
	var r io.Reader = bytes.NewReader(o.data)
	if _, drop, _, _ := s.hooks(); drop != nil {
		if n := drop(key); n >= 0 {
			r = io.MultiReader(io.LimitReader(r, n), errReader{errors.New("read tcp 127.0.0.1:1234->127.0.0.1:9000: read: connection reset by peer")})
		}
	}
	return io.NopCloser(r), objstore.Object{Key: key, Size: int64(len(o.data)), Version: o.version, ModTime: o.mod}, nil
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func (s *memStore) Head(ctx context.Context, key string) (objstore.Object, error) {
	s.heads.Add(1)
	if err := s.check("head", key); err != nil {
		return objstore.Object{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objs[key]
	if !ok {
		return objstore.Object{}, &objstore.Error{Op: "head", Key: key, Status: 404, Err: objstore.ErrNotFound}
	}
	return objstore.Object{Key: key, Size: int64(len(o.data)), Version: o.version, ModTime: o.mod}, nil
}

func (s *memStore) condFails(key string, cond objstore.Condition) bool {
	if s.ignoreConditions.Load() {
		return false
	}
	o, ok := s.objs[key]
	return (cond.IfNoneMatch && ok) || (cond.IfMatch != "" && (!ok || o.version != cond.IfMatch))
}

func (s *memStore) Put(ctx context.Context, key string, r io.ReaderAt, size int64, cond objstore.Condition) (objstore.Object, error) {
	s.puts.Add(1)
	if err := s.check("put", key); err != nil {
		return objstore.Object{}, err
	}
	data, err := io.ReadAll(io.NewSectionReader(r, 0, size))
	if err != nil {
		return objstore.Object{}, err
	}
	if _, _, before, _ := s.hooks(); before != nil {
		before(key)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.condFails(key, cond) {
		return objstore.Object{}, &objstore.Error{Op: "put", Key: key, Status: 412, Code: "PreconditionFailed", Message: "At least one of the pre-conditions you specified did not hold", Err: objstore.ErrPrecondition}
	}
	return s.putLocked(key, data), nil
}

func (s *memStore) putLocked(key string, data []byte) objstore.Object {
	s.seq++
	o := memObj{data: data, version: fmt.Sprintf("\"v%d\"", s.seq), mod: time.Unix(1_700_000_000+int64(s.seq), 0)}
	s.objs[key] = o
	return objstore.Object{Key: key, Size: int64(len(data)), Version: o.version, ModTime: o.mod}
}

func (s *memStore) Delete(ctx context.Context, key string, cond objstore.Condition) error {
	s.deletes.Add(1)
	if err := s.check("delete", key); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.objs[key]; !ok {
		return &objstore.Error{Op: "delete", Key: key, Status: 404, Code: "NoSuchKey", Err: objstore.ErrNotFound}
	}
	if s.condFails(key, cond) {
		return &objstore.Error{Op: "delete", Key: key, Status: 412, Code: "PreconditionFailed", Err: objstore.ErrPrecondition}
	}
	delete(s.objs, key)
	return nil
}

// set writes key directly, as another writer of the bucket would.
func (s *memStore) set(key, body string) objstore.Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.putLocked(key, []byte(body))
}

// remove deletes key directly, as another writer of the bucket would.
func (s *memStore) remove(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objs, key)
}

// contents returns the bucket's objects under prefix, by key.
func (s *memStore) contents(prefix string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[string]string{}
	for k, o := range s.objs {
		if strings.HasPrefix(k, prefix) {
			m[k] = string(o.data)
		}
	}
	return m
}

// TestMemStoreConformance checks the tests' store against the suite the
// real clients pass, so that what the tests show holds for them.
func TestMemStoreConformance(t *testing.T) {
	storetest.Run(t, newMemStore(), &memStore{noBucket: true}, storetest.Options{Large: 1 << 20})
	ign := newMemStore()
	ign.ignoreConditions.Store(true)
	t.Run("IgnoresConditions", func(t *testing.T) {
		storetest.Run(t, ign, &memStore{noBucket: true}, storetest.Options{IgnoresConditions: true})
	})
}
