package mounts

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/toolhost/toolhost/objstore"
	"github.com/toolhost/toolhost/objstore/s3"
)

// TestS3Gofakes3 runs a read-only and a writable mount against the S3
// client and gofakes3 as it is (s3mem, on 127.0.0.1), which ignores
// If-Match on DELETE: the Head before each write is what keeps a change
// made in the bucket.
func TestS3Gofakes3(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("bkt"); err != nil {
		t.Fatal(err)
	}
	fake := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog()))
	var lists, gets atomic.Int64
	h := fake.Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			if strings.Count(strings.Trim(r.URL.Path, "/"), "/") == 0 {
				lists.Add(1)
			} else {
				gets.Add(1)
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	creds := objstore.Credentials{AccessKeyID: "AKIAPLANTEDKEYID0001", SecretAccessKey: "plantedSecretAccessKey/abc+xyz", Endpoint: srv.URL, Region: "us-east-1"}
	opener := func(kind, bucket string, c objstore.Credentials) (objstore.Store, error) {
		return s3.New(bucket, c, s3.Options{Kind: kind})
	}
	open := func(flag string) objstore.Store {
		spec, err := ParseFlag(flag)
		if err != nil {
			t.Fatal(err)
		}
		st, err := Open(spec, creds, opener)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open("name=x,path=/x,uri=s3://bkt")
	put := func(key, body string) {
		t.Helper()
		if _, err := st.Put(ctx, key, strings.NewReader(body), int64(len(body)), objstore.Condition{}); err != nil {
			t.Fatal(err)
		}
	}
	put("data/a", "A1")
	put("data/sub/b", "B1")
	put("data-old/c", "C1")

	t.Run("ReadOnly", func(t *testing.T) {
		m, _ := newTestMount(t, open("name=ro,path=/ro,uri=s3://bkt/data"), "s3://bkt/data", false, Limits{})
		v := prepare(t, m)
		wantTree(t, v, map[string]string{"a": "A1", "sub/": "", "sub/b": "B1"})
		l, g := lists.Load(), gets.Load()
		if v2 := prepare(t, m); v2 != v {
			t.Errorf("an unchanged bucket's view %s, want %s", v2, v)
		}
		if dl, dg := lists.Load()-l, gets.Load()-g; dl != 1 || dg != 0 {
			t.Errorf("prepare of an unchanged bucket: %d lists, %d gets; want 1, 0", dl, dg)
		}
	})

	t.Run("Writable", func(t *testing.T) {
		m, _ := newTestMount(t, open("name=rw,path=/rw,uri=s3://bkt/data,rw"), "s3://bkt/data", true, Limits{})
		work := prepare(t, m)
		must(t, os.WriteFile(filepath.Join(work, "a"), []byte("A-local"), 0o644))
		must(t, os.Remove(filepath.Join(work, "sub/b")))
		must(t, os.WriteFile(filepath.Join(work, "n"), []byte("N"), 0o644))
		res, err := m.WriteBack(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(Result{Uploaded: 2, Deleted: 1}, res); diff != "" {
			t.Errorf("write-back mismatch (-want +got):\n%s", diff)
		}
		got := map[string]string{}
		for _, k := range []string{"data/a", "data/n", "data/sub/b", "data-old/c"} {
			o, err := st.Head(ctx, k)
			switch {
			case errors.Is(err, objstore.ErrNotFound):
				continue
			case err != nil:
				t.Fatal(err)
			}
			got[k] = o.Key
		}
		if diff := cmp.Diff(map[string]string{"data/a": "data/a", "data/n": "data/n", "data-old/c": "data-old/c"}, got); diff != "" {
			t.Errorf("bucket mismatch (-want +got):\n%s", diff)
		}
		if res, err := m.WriteBack(ctx); err != nil || res.Uploaded+res.Deleted != 0 {
			t.Errorf("second write-back: %+v, %v; want nothing written", res, err)
		}

		// Another writer changes n; the mount deletes it. gofakes3
		// would delete it whatever its If-Match said: the Head refuses.
		put("data/n", "theirs")
		must(t, os.Remove(filepath.Join(work, "n")))
		res, err = m.WriteBack(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"n"}, res.Conflicts); diff != "" {
			t.Errorf("conflicts mismatch (-want +got):\n%s", diff)
		}
		if _, err := st.Head(ctx, "data/n"); err != nil {
			t.Errorf("the object changed in the bucket: %v, want it kept", err)
		}
		wantTree(t, prepare(t, m), map[string]string{"a": "A-local", "n": "theirs"})
	})
}
