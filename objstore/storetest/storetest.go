// Package storetest is the conformance suite every objstore client passes
// against a real server (gofakes3, fake-gcs-server, Azurite): Run drives a
// Store through listing, reads, conditional writes and deletes, and a
// multipart upload, and checks what the server then holds.
package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/objstore"
)

// Options says what a store under test can do.
type Options struct {
	// Large is the size of the object Run uploads to make the client use
	// its multipart path (a few parts of its part size); 0 skips it.
	Large int64
	// IgnoresConditions is a store that does not honour conditional
	// writes (s3rver): Run checks that the writes go through and skips
	// the refusals.
	IgnoresConditions bool
}

// Run runs the suite on the empty bucket s; missing is the same store's
// client for a bucket that does not exist.
func Run(t *testing.T, s, missing objstore.Store, o Options) {
	ctx := context.Background()
	put := func(t *testing.T, key, body string, cond objstore.Condition) (objstore.Object, error) {
		t.Helper()
		return s.Put(ctx, key, strings.NewReader(body), int64(len(body)), cond)
	}
	mustPut := func(t *testing.T, key, body string) objstore.Object {
		t.Helper()
		obj, err := put(t, key, body, objstore.Condition{})
		if err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		if obj.Key != key || obj.Size != int64(len(body)) || obj.Version == "" {
			t.Fatalf("put %s answered %+v", key, obj)
		}
		return obj
	}
	read := func(t *testing.T, key, version string) (string, error) {
		t.Helper()
		rc, _, err := s.Open(ctx, key, version)
		if err != nil {
			return "", err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		return string(b), err
	}
	list := func(t *testing.T, prefix string) []string {
		t.Helper()
		var keys []string
		if err := s.List(ctx, prefix, func(o objstore.Object) error {
			keys = append(keys, o.Key)
			return nil
		}); err != nil {
			t.Fatalf("list %q: %v", prefix, err)
		}
		return keys
	}

	t.Run("ListInOrderUnderPrefix", func(t *testing.T) {
		for _, k := range []string{"list/b", "list/a/deep/x", "list/a", "list-old/c", "lis"} {
			mustPut(t, k, "v-"+k)
		}
		if diff := cmp.Diff([]string{"list/a", "list/a/deep/x", "list/b"}, list(t, "list/")); diff != "" {
			t.Errorf("list mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("ListManyPages", func(t *testing.T) {
		const n = 1100 // over a page of 1,000
		var want []string
		for i := range n {
			k := fmt.Sprintf("page/%04d", i)
			want = append(want, k)
			if _, err := put(t, k, "", objstore.Condition{}); err != nil {
				t.Fatal(err)
			}
		}
		if diff := cmp.Diff(want, list(t, "page/")); diff != "" {
			t.Errorf("list of %d mismatch (-want +got):\n%s", n, diff)
		}
	})
	t.Run("ReadWhatWasWritten", func(t *testing.T) {
		obj := mustPut(t, "read/a b+c", "hello")
		got, err := read(t, "read/a b+c", obj.Version)
		if err != nil || got != "hello" {
			t.Fatalf("read: %q, %v", got, err)
		}
		h, err := s.Head(ctx, "read/a b+c")
		if err != nil || h.Version != obj.Version || h.Size != 5 {
			t.Fatalf("head: %+v, %v; want version %q size 5", h, err, obj.Version)
		}
		var seen objstore.Object
		s.List(ctx, "read/", func(o objstore.Object) error { seen = o; return nil })
		if seen.Version != obj.Version || seen.Size != 5 {
			t.Errorf("listed %+v, want version %q size 5", seen, obj.Version)
		}
	})
	t.Run("MissingObject", func(t *testing.T) {
		if _, err := read(t, "nope", ""); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("open of a missing object: %v, want ErrNotFound", err)
		}
		if _, err := s.Head(ctx, "nope"); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("head of a missing object: %v, want ErrNotFound", err)
		}
	})
	t.Run("MissingBucket", func(t *testing.T) {
		err := missing.List(ctx, "", func(objstore.Object) error { return nil })
		if !errors.Is(err, objstore.ErrNoBucket) {
			t.Errorf("list of a missing bucket: %v, want ErrNoBucket", err)
		}
	})
	t.Run("ConditionalWrites", func(t *testing.T) {
		v1 := mustPut(t, "cond/x", "one")
		v2, err := put(t, "cond/x", "two", objstore.Condition{IfMatch: v1.Version})
		if err != nil {
			t.Fatalf("put if-match the current version: %v", err)
		}
		if o.IgnoresConditions {
			return
		}
		if _, err := put(t, "cond/x", "three", objstore.Condition{IfMatch: v1.Version}); !errors.Is(err, objstore.ErrPrecondition) {
			t.Errorf("put if-match a stale version: %v, want ErrPrecondition", err)
		}
		if _, err := put(t, "cond/x", "four", objstore.Condition{IfNoneMatch: true}); !errors.Is(err, objstore.ErrPrecondition) {
			t.Errorf("create over an object: %v, want ErrPrecondition", err)
		}
		if got, _ := read(t, "cond/x", ""); got != "two" {
			t.Errorf("after the refused writes the object holds %q, want %q", got, "two")
		}
		if _, err := read(t, "cond/x", v1.Version); !errors.Is(err, objstore.ErrPrecondition) {
			t.Errorf("open of a stale version: %v, want ErrPrecondition", err)
		}
		if err := s.Delete(ctx, "cond/x", objstore.Condition{IfMatch: v1.Version}); !errors.Is(err, objstore.ErrPrecondition) {
			t.Errorf("delete if-match a stale version: %v, want ErrPrecondition", err)
		}
		if err := s.Delete(ctx, "cond/x", objstore.Condition{IfMatch: v2.Version}); err != nil {
			t.Errorf("delete if-match the current version: %v", err)
		}
		if _, err := s.Head(ctx, "cond/x"); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("after its delete: %v, want ErrNotFound", err)
		}
		if _, err := put(t, "cond/new", "n", objstore.Condition{IfNoneMatch: true}); err != nil {
			t.Errorf("create of a new object: %v", err)
		}
	})
	t.Run("Multipart", func(t *testing.T) {
		if o.Large == 0 {
			t.Skip("the store under test has no multipart path to drive")
		}
		body := make([]byte, o.Large)
		rand.Read(body)
		obj, err := s.Put(ctx, "big/blob", bytes.NewReader(body), o.Large, objstore.Condition{IfNoneMatch: true})
		if err != nil {
			t.Fatalf("multipart put of %d bytes: %v", o.Large, err)
		}
		rc, got, err := s.Open(ctx, "big/blob", obj.Version)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil || !bytes.Equal(b, body) || got.Size != o.Large {
			t.Fatalf("read back %d bytes (equal %v, size %d), %v", len(b), bytes.Equal(b, body), got.Size, err)
		}
	})
}
