package azblob

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/toolhost/toolhost/internal/azuritetest"
	"github.com/toolhost/toolhost/objstore"
	"github.com/toolhost/toolhost/objstore/storetest"
)

// wrongKey is a well-formed account key that is not the account's.
var wrongKey = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("wrong key "), 7)[:64])

// TestAzurite runs the client against a real Azurite, one for all its
// subtests (it takes seconds to start), each in a container of its own.
func TestAzurite(t *testing.T) {
	srv := azuritetest.Start(t)
	creds := objstore.Credentials{AccountName: srv.AccountName, AccountKey: srv.AccountKey, Endpoint: srv.Endpoint}
	ctx := context.Background()
	// open returns the Store of a new container.
	open := func(t *testing.T, container string, o Options) *Store {
		t.Helper()
		s, err := New(container, creds, o)
		if err != nil {
			t.Fatal(err)
		}
		createContainer(t, s)
		return s
	}

	t.Run("Conformance", func(t *testing.T) {
		s := open(t, "conformance", Options{BlockSize: 1 << 20, Concurrency: 3})
		missing, err := New("nosuchcontainer", creds, Options{})
		if err != nil {
			t.Fatal(err)
		}
		// Three blocks and a half.
		storetest.Run(t, s, missing, storetest.Options{Large: 3<<20 + 512<<10})
	})

	t.Run("ListPages", func(t *testing.T) {
		s := open(t, "pages", Options{listPage: 7})
		var want []string
		for i := range 30 {
			k := "p/" + string(rune('a'+i%26)) + strings.Repeat("z", i/26)
			want = append(want, k)
			mustPut(t, s, k, "x")
		}
		mustPut(t, s, "q", "outside the prefix")
		slices.Sort(want)
		if got := keys(t, s, "p/"); !slices.Equal(got, want) {
			t.Errorf("listed %q, want %q", got, want)
		}
		// An error from fn ends the listing and is returned as it is.
		stop := errors.New("stop")
		n := 0
		err := s.List(ctx, "p/", func(objstore.Object) error { n++; return stop })
		if err != stop || n != 1 {
			t.Errorf("List with fn failing: %v after %d calls, want stop after 1", err, n)
		}
	})

	t.Run("Names", func(t *testing.T) {
		s := open(t, "names", Options{})
		names := []string{
			"with space/and+plus", "unicode/ünïcødé ✓ 日本", "deep/a/b/c/d.txt",
			"punct/%25 % ? # & = ; , ' \" ! * ( ) [ ] @ $ ~", "punct/trailing space ",
			"plus+plus+", "tab\tname", "a:b",
		}
		for _, k := range names {
			put := mustPut(t, s, k, "body of "+k)
			h, err := s.Head(ctx, k)
			if err != nil || h.Key != k || h.Version != put.Version || h.ModTime.IsZero() || put.ModTime.IsZero() {
				t.Errorf("head %q: %+v, %v; want version %s and a time, after a put of %+v", k, h, err, put.Version, put)
			}
			rc, got, err := s.Open(ctx, k, put.Version)
			if err != nil {
				t.Errorf("open %q: %v", k, err)
				continue
			}
			b, _ := io.ReadAll(rc)
			rc.Close()
			if string(b) != "body of "+k || got.Key != k || got.Size != int64(len(b)) {
				t.Errorf("open %q: %q, %+v", k, b, got)
			}
		}
		s.List(ctx, "", func(o objstore.Object) error {
			if o.ModTime.IsZero() || o.Version == "" {
				t.Errorf("listed %+v, with no time or version", o)
			}
			return nil
		})
		want := slices.Clone(names)
		slices.Sort(want)
		if got := keys(t, s, ""); !slices.Equal(got, want) {
			t.Errorf("listed %q, want %q", got, want)
		}
		if got := keys(t, s, "punct/%25 %"); len(got) != 1 || got[0] != names[3] {
			t.Errorf("listed under a prefix with %%: %q", got)
		}
		for _, k := range names {
			if err := s.Delete(ctx, k, objstore.Condition{}); err != nil {
				t.Errorf("delete %q: %v", k, err)
			}
		}
		if got := keys(t, s, ""); len(got) != 0 {
			t.Errorf("after the deletes: %q", got)
		}
	})

	t.Run("WrongKey", func(t *testing.T) {
		good := open(t, "wrongkey", Options{})
		mustPut(t, good, "k", "v")
		bad := creds
		bad.AccountKey = wrongKey
		s, err := New("wrongkey", bad, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for op, err := range allOps(s, "k") {
			var e *objstore.Error
			if !errors.Is(err, objstore.ErrAuth) || !errors.As(err, &e) || e.Status != http.StatusForbidden {
				t.Errorf("%s with a wrong key: %v, want ErrAuth (HTTP 403)", op, err)
				continue
			}
			if op != "head" && e.Code != "AuthenticationFailed" && e.Code != "AuthorizationFailure" {
				t.Errorf("%s with a wrong key: code %q, want AuthenticationFailed (Azure) or AuthorizationFailure (Azurite)", op, e.Code)
			}
			t.Logf("%s: %v", op, err)
			noSecret(t, err, wrongKey, srv.AccountKey)
			if strings.Contains(err.Error(), "RequestId") || strings.Contains(err.Error(), "Time:") {
				t.Errorf("%s: the message keeps the service's RequestId and Time lines: %v", op, err)
			}
		}
	})

	t.Run("SAS", func(t *testing.T) {
		open(t, "sas", Options{})
		sas := accountSAS(t, srv.AccountName, srv.AccountKey)
		s, err := New("sas", objstore.Credentials{SessionToken: "?" + sas, Endpoint: srv.Endpoint}, Options{BlockSize: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		body := make([]byte, 2<<20+5)
		rand.Read(body)
		obj, err := s.Put(ctx, "sas/big b+", bytes.NewReader(body), int64(len(body)), objstore.Condition{IfNoneMatch: true})
		if err != nil {
			t.Fatalf("put with a SAS: %v", err)
		}
		rc, _, err := s.Open(ctx, "sas/big b+", obj.Version)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(got, body) {
			t.Errorf("read back %d bytes, not the %d written", len(got), len(body))
		}
		if ks := keys(t, s, "sas/"); !slices.Equal(ks, []string{"sas/big b+"}) {
			t.Errorf("listed %q", ks)
		}

		// A SAS signed with another key is refused, and no error shows
		// it.
		forged := accountSAS(t, srv.AccountName, wrongKey)
		s, err = New("sas", objstore.Credentials{SessionToken: forged, Endpoint: srv.Endpoint}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		q, _ := url.ParseQuery(forged)
		for op, err := range allOps(s, "sas/big b+") {
			if !errors.Is(err, objstore.ErrAuth) {
				t.Errorf("%s with a forged SAS: %v, want ErrAuth", op, err)
			}
			noSecret(t, err, forged, q.Get("sig"), url.QueryEscape(q.Get("sig")))
		}
	})

	t.Run("MissingContainer", func(t *testing.T) {
		s, err := New("nosuchcontainer", creds, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Put(ctx, "k", strings.NewReader("v"), 1, objstore.Condition{}); !errors.Is(err, objstore.ErrNoBucket) {
			t.Errorf("put into a missing container: %v, want ErrNoBucket", err)
		}
		if _, err := s.Head(ctx, "k"); !errors.Is(err, objstore.ErrNoBucket) && !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("head in a missing container: %v, want ErrNoBucket or ErrNotFound", err)
		}
	})

	t.Run("LargeConditions", func(t *testing.T) {
		s := open(t, "largecond", Options{BlockSize: 1 << 20, Concurrency: 2})
		body := make([]byte, 5<<20)
		rand.Read(body)
		put := func(cond objstore.Condition) (objstore.Object, error) {
			return s.Put(ctx, "big", bytes.NewReader(body), int64(len(body)), cond)
		}
		v1, err := put(objstore.Condition{IfNoneMatch: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := put(objstore.Condition{IfNoneMatch: true}); !errors.Is(err, objstore.ErrPrecondition) {
			t.Errorf("large create over an object: %v, want ErrPrecondition", err)
		}
		v2, err := put(objstore.Condition{IfMatch: v1.Version})
		if err != nil {
			t.Fatalf("large put if-match the current version: %v", err)
		}
		if v2.Version == v1.Version || v2.Size != int64(len(body)) {
			t.Errorf("large put answered %+v after %+v", v2, v1)
		}
		if _, err := put(objstore.Condition{IfMatch: v1.Version}); !errors.Is(err, objstore.ErrPrecondition) {
			t.Errorf("large put if-match a stale version: %v, want ErrPrecondition", err)
		}
		// The commit checks the condition too, whatever the check before
		// the upload saw: blocks staged, then the blob changes, then the
		// commit.
		ids := []string{base64.StdEncoding.EncodeToString([]byte("block-0000000001"))}
		stage(t, s, "big", ids[0], "staged")
		mustPut(t, s, "big", "changed meanwhile")
		err = commit(t, s, "big", ids, objstore.Condition{IfMatch: v2.Version})
		if !errors.Is(err, objstore.ErrPrecondition) {
			t.Errorf("commit if-match a version changed meanwhile: %v, want ErrPrecondition", err)
		}
		err = commit(t, s, "big", ids, objstore.Condition{IfNoneMatch: true})
		if !errors.Is(err, objstore.ErrPrecondition) {
			t.Errorf("commit if-none-match over an object: %v, want ErrPrecondition", err)
		}
		if h, _ := s.Head(ctx, "big"); h.Size != int64(len("changed meanwhile")) {
			t.Errorf("after the refused commits: %+v", h)
		}
	})

	t.Run("ShortReader", func(t *testing.T) {
		s := open(t, "short", Options{BlockSize: 1 << 20})
		for _, size := range []int64{10, 3 << 20} {
			_, err := s.Put(ctx, "short", bytes.NewReader(make([]byte, size-1)), size, objstore.Condition{})
			if err == nil {
				t.Errorf("put of %d bytes from a reader of %d: no error", size, size-1)
			}
		}
		if _, err := s.Head(ctx, "short"); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("after failed puts: %v, want ErrNotFound", err)
		}
	})

	t.Run("DeleteMissing", func(t *testing.T) {
		s := open(t, "delmissing", Options{})
		if err := s.Delete(ctx, "nope", objstore.Condition{}); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("delete of a missing object: %v, want ErrNotFound", err)
		}
		if _, err := s.Head(ctx, ""); err == nil {
			t.Errorf("head of the empty key: no error")
		}
	})
}

// allOps runs each of s's operations on key, for the errors they return.
func allOps(s *Store, key string) map[string]error {
	ctx := context.Background()
	errs := map[string]error{}
	errs["list"] = s.List(ctx, "", func(objstore.Object) error { return nil })
	_, _, errs["get"] = s.Open(ctx, key, "")
	_, errs["head"] = s.Head(ctx, key)
	_, errs["put"] = s.Put(ctx, key, strings.NewReader("new"), 3, objstore.Condition{})
	errs["delete"] = s.Delete(ctx, key, objstore.Condition{})
	return errs
}

// noSecret fails the test if err's text holds one of secrets.
func noSecret(t *testing.T, err error, secrets ...string) {
	t.Helper()
	for _, secret := range secrets {
		if secret != "" && err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("the error shows a secret: %v", err)
		}
	}
}

// createContainer creates s's container (Create Container), which the
// Store itself never does.
func createContainer(t *testing.T, s *Store) {
	t.Helper()
	resp, err := s.do(context.Background(), &call{op: "create", method: http.MethodPut,
		query: [][2]string{{"restype", "container"}}, body: func() io.Reader { return nil }})
	if err != nil {
		t.Fatalf("creating container %s: %v", s.container, err)
	}
	resp.Body.Close()
}

// stage stages a block of the blob key, which commit commits.
func stage(t *testing.T, s *Store, key, id, body string) {
	t.Helper()
	if err := s.putBlock(context.Background(), key, id, strings.NewReader(body), 0, int64(len(body))); err != nil {
		t.Fatal(err)
	}
}

// commit commits the blocks ids as the blob key if cond holds.
func commit(t *testing.T, s *Store, key string, ids []string, cond objstore.Condition) error {
	t.Helper()
	var b strings.Builder
	b.WriteString("<BlockList>")
	for _, id := range ids {
		b.WriteString("<Latest>" + id + "</Latest>")
	}
	b.WriteString("</BlockList>")
	c := &call{op: "put", key: key, method: http.MethodPut, blob: true, header: http.Header{},
		query: [][2]string{{"comp", "blocklist"}},
		body:  func() io.Reader { return strings.NewReader(b.String()) }, size: int64(b.Len())}
	conditions(c.header, cond)
	resp, err := s.do(context.Background(), c)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

func mustPut(t *testing.T, s *Store, key, body string) objstore.Object {
	t.Helper()
	o, err := s.Put(context.Background(), key, strings.NewReader(body), int64(len(body)), objstore.Condition{})
	if err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
	return o
}

func keys(t *testing.T, s *Store, prefix string) []string {
	t.Helper()
	var ks []string
	if err := s.List(context.Background(), prefix, func(o objstore.Object) error {
		ks = append(ks, o.Key)
		return nil
	}); err != nil {
		t.Fatalf("list %q: %v", prefix, err)
	}
	return ks
}

// accountSAS is an account SAS for the Blob service (objects and
// containers, all permissions, until 2099) signed with key: the string to
// sign of versions 2020-12-06 and later
// (learn.microsoft.com/rest/api/storageservices/create-account-sas).
func accountSAS(t *testing.T, account, key string) string {
	t.Helper()
	k, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		t.Fatal(err)
	}
	const sp, ss, srt, se, spr, sv = "rwdlac", "b", "co", "2099-01-01T00:00:00Z", "https,http", apiVersion
	sts := strings.Join([]string{account, sp, ss, srt, "", se, "", spr, sv, "", ""}, "\n")
	m := hmac.New(sha256.New, k)
	m.Write([]byte(sts))
	q := url.Values{"sv": {sv}, "ss": {ss}, "srt": {srt}, "sp": {sp}, "se": {se}, "spr": {spr},
		"sig": {base64.StdEncoding.EncodeToString(m.Sum(nil))}}
	return q.Encode()
}
