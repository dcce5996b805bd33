package azblob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolhost/toolhost/objstore"
)

// devKey is Azurite's development account key (public, documented).
const devKey = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

// TestStringToSignDocumented checks the string to sign of the example in
// Microsoft's "Authorize with Shared Key" (a Get Container Metadata of
// 2015-02-21), as the page prints it.
func TestStringToSignDocumented(t *testing.T) {
	req, _ := http.NewRequest(http.MethodGet, "https://myaccount.blob.core.windows.net/mycontainer?restype=container&comp=metadata&timeout=20", nil)
	req.Header.Set("x-ms-date", "Fri, 26 Jun 2015 23:39:12 GMT")
	req.Header.Set("x-ms-version", "2015-02-21")
	want := "GET\n\n\n\n\n\n\n\n\n\n\n\n" +
		"x-ms-date:Fri, 26 Jun 2015 23:39:12 GMT\nx-ms-version:2015-02-21\n" +
		"/myaccount/mycontainer\ncomp:metadata\nrestype:container\ntimeout:20"
	if got := stringToSign(req, "myaccount"); got != want {
		t.Errorf("string to sign:\n%q\nwant\n%q", got, want)
	}
}

// TestStringToSignPut checks a Put Block's string to sign: the headers in
// their places, the account twice for an Azurite endpoint, the path as
// sent (encoded), the query decoded.
func TestStringToSignPut(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	s, err := New("c", objstore.Credentials{AccountName: "devstoreaccount1", AccountKey: devKey, Endpoint: srv.URL + "/devstoreaccount1"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.client.Transport = roundTripper(func(req *http.Request) (*http.Response, error) {
		got = stringToSign(req, "devstoreaccount1")
		// The signature sent is the one of that string.
		if want := "SharedKey devstoreaccount1:" + signature(s.key, got); req.Header.Get("Authorization") != want {
			t.Errorf("Authorization: %q, want %q", req.Header.Get("Authorization"), want)
		}
		req.Header.Set("x-ms-date", "DATE")
		got = stringToSign(req, "devstoreaccount1")
		return http.DefaultTransport.RoundTrip(req)
	})
	if err := s.putBlock(context.Background(), "a b+c/ü", "AB+/Cw==", strings.NewReader("hello"), 0, 5); err != nil {
		t.Fatal(err)
	}
	want := "PUT\n\n\n5\nXUFAKrxLKna5cZ2REBfFkg==\n\n\n\n\n\n\n\n" +
		"x-ms-date:DATE\nx-ms-version:" + apiVersion + "\n" +
		"/devstoreaccount1/devstoreaccount1/c/a%20b%2Bc/%C3%BC\nblockid:AB+/Cw==\ncomp:block"
	if got != want {
		t.Errorf("string to sign:\n%q\nwant\n%q", got, want)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestURLs checks the request line each operation sends: names escaped
// but for "/", the endpoint's path kept, the query escaped with %20.
func TestURLs(t *testing.T) {
	var lines []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lines = append(lines, r.Method+" "+r.RequestURI)
		switch {
		case r.Method == http.MethodGet && r.URL.Query().Get("comp") == "list":
			io.WriteString(w, `<?xml version="1.0" encoding="utf-8"?><EnumerationResults><Blobs>`+
				`<Blob><Name>x</Name><Properties><Etag>0x1</Etag><Content-Length>3</Content-Length></Properties></Blob>`+
				`<Blob><Name Encoded="true">ctl%01</Name><Properties><Etag>"0x2"</Etag><Content-Length>1</Content-Length></Properties></Blob>`+
				`</Blobs><NextMarker/></EnumerationResults>`)
		case r.Method == http.MethodPut:
			w.Header().Set("ETag", `"0x3"`)
			w.WriteHeader(http.StatusCreated)
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusAccepted)
		default:
			w.Header().Set("ETag", `"0x1"`)
			w.Header().Set("Content-Length", "3")
			io.WriteString(w, "abc")
		}
	}))
	defer srv.Close()
	s, err := New("ctr", objstore.Credentials{AccountName: "acct", AccountKey: devKey, Endpoint: srv.URL + "/acct/"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := "dir/a b+c?d#e%f&ü"
	var listed []objstore.Object
	if err := s.List(ctx, "dir/a b+", func(o objstore.Object) error { listed = append(listed, o); return nil }); err != nil {
		t.Fatal(err)
	}
	rc, _, err := s.Open(ctx, key, "0x1")
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if _, err := s.Head(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, key, strings.NewReader("abc"), 3, objstore.Condition{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, key, objstore.Condition{}); err != nil {
		t.Fatal(err)
	}
	enc := "/acct/ctr/dir/a%20b%2Bc%3Fd%23e%25f%26%C3%BC"
	want := []string{
		"GET /acct/ctr?restype=container&comp=list&prefix=dir%2Fa%20b%2B",
		"GET " + enc, "HEAD " + enc, "PUT " + enc, "DELETE " + enc,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("request lines:\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if len(listed) != 2 || listed[0].Key != "x" || listed[0].Version != `"0x1"` || listed[0].Size != 3 ||
		listed[1].Key != "ctl\x01" || listed[1].Version != `"0x2"` {
		t.Errorf("listed %+v", listed)
	}
}

// TestEndpoints checks which endpoints New takes: https anywhere, http
// only on loopback, and none with a query, user or fragment.
func TestEndpoints(t *testing.T) {
	creds := objstore.Credentials{AccountName: "acct", AccountKey: devKey}
	for _, tc := range []struct {
		endpoint string
		ok       bool
		host     string
	}{
		{"", true, "acct.blob.core.windows.net"},
		{"https://acct.blob.core.windows.net", true, "acct.blob.core.windows.net"},
		{"https://blob.example.com/", true, "blob.example.com"},
		{"http://127.0.0.1:10000/devstoreaccount1", true, "127.0.0.1:10000"},
		{"http://127.9.9.9:10000", true, "127.9.9.9:10000"},
		{"http://localhost:10000/devstoreaccount1", true, "localhost:10000"},
		{"http://[::1]:10000/devstoreaccount1", true, "[::1]:10000"},
		{"http://acct.blob.core.windows.net", false, ""},
		{"http://10.0.0.1:10000/devstoreaccount1", false, ""},
		{"http://localhost.example.com", false, ""},
		{"ftp://127.0.0.1/", false, ""},
		{"https://user:hunter2@blob.example.com", false, ""},
		{"https://blob.example.com/?sv=1&sig=x", false, ""},
		{"127.0.0.1:10000", false, ""},
	} {
		c := creds
		c.Endpoint = tc.endpoint
		s, err := New("ctr", c, Options{})
		if (err == nil) != tc.ok {
			t.Errorf("endpoint %q: %v, want ok %v", tc.endpoint, err, tc.ok)
			continue
		}
		if err != nil {
			noSecret(t, err, devKey, "hunter2", "sig=x")
			continue
		}
		if s.host != tc.host {
			t.Errorf("endpoint %q: host %q, want %q", tc.endpoint, s.host, tc.host)
		}
		if strings.HasPrefix(tc.endpoint, "http://") && s.scheme != "http" {
			t.Errorf("endpoint %q: scheme %q", tc.endpoint, s.scheme)
		}
	}
}

// TestCredentials checks what New takes for credentials, and that no
// error it returns shows one.
func TestCredentials(t *testing.T) {
	const sas = "sv=2021-08-06&ss=b&srt=co&sp=r&se=2099-01-01T00%3A00%3A00Z&sig=c2VjcmV0c2lnbmF0dXJl"
	for _, tc := range []struct {
		creds objstore.Credentials
		ok    bool
	}{
		{objstore.Credentials{AccountName: "acct", AccountKey: devKey}, true},
		{objstore.Credentials{AccountName: "acct", AccountKey: "not base64 at all: s3cr3t!"}, false},
		{objstore.Credentials{AccountKey: devKey, Endpoint: "https://blob.example.com"}, false},
		{objstore.Credentials{AccountName: "acct"}, false},
		{objstore.Credentials{AccountName: "Not An Account", AccountKey: devKey}, false},
		{objstore.Credentials{AccountName: "acct", SessionToken: "?" + sas}, true},
		{objstore.Credentials{SessionToken: sas, Endpoint: "https://blob.example.com"}, true},
		{objstore.Credentials{AccountName: "acct", SessionToken: "sv=2021-08-06&se=s3cr3t"}, false},
		{objstore.Credentials{AccountName: "acct", SessionToken: "%zz s3cr3t"}, false},
	} {
		_, err := New("ctr", tc.creds, Options{})
		if (err == nil) != tc.ok {
			t.Errorf("%v: %v, want ok %v", tc.creds, err, tc.ok)
		}
		noSecret(t, err, devKey, "s3cr3t", "c2VjcmV0c2lnbmF0dXJl")
	}
	if _, err := New("", objstore.Credentials{AccountName: "acct", AccountKey: devKey}, Options{}); err == nil {
		t.Errorf("an empty container: no error")
	}
}

// TestRetries checks which answers are sent again: a 5xx, up to four
// times in all; a broken connection; never a 4xx.
func TestRetries(t *testing.T) {
	var n atomic.Int32
	var fail func(w http.ResponseWriter, try int32) bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		try := n.Add(1)
		io.Copy(io.Discard, r.Body)
		if fail(w, try) {
			return
		}
		w.Header().Set("ETag", `"0x9"`)
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	const sig = "c2VjcmV0c2lnbmF0dXJl"
	s, err := New("ctr", objstore.Credentials{SessionToken: "sv=2021-08-06&sig=" + sig, Endpoint: srv.URL}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	status := func(code int, until int32) func(http.ResponseWriter, int32) bool {
		return func(w http.ResponseWriter, try int32) bool {
			if try > until {
				return false
			}
			w.Header().Set("x-ms-error-code", "ServerBusy")
			w.WriteHeader(code)
			fmt.Fprintf(w, "<?xml version=\"1.0\"?><Error><Code>ServerBusy</Code><Message>busy, sig=%s\nRequestId:1\nTime:now</Message></Error>", sig)
			return true
		}
	}
	for _, tc := range []struct {
		name  string
		fail  func(http.ResponseWriter, int32) bool
		tries int32
		err   error // nil: the put succeeds
	}{
		{"503 twice", status(http.StatusServiceUnavailable, 2), 3, nil},
		{"500 always", status(http.StatusInternalServerError, 100), attempts, errors.New("")},
		{"501", status(http.StatusNotImplemented, 100), 1, errors.New("")},
		{"400", status(http.StatusBadRequest, 100), 1, errors.New("")},
		{"412", status(http.StatusPreconditionFailed, 100), 1, objstore.ErrPrecondition},
		{"409 BlobAlreadyExists", func(w http.ResponseWriter, try int32) bool {
			w.Header().Set("x-ms-error-code", "BlobAlreadyExists")
			w.WriteHeader(http.StatusConflict)
			return true
		}, 1, objstore.ErrPrecondition},
		{"reset once", func(w http.ResponseWriter, try int32) bool {
			if try > 1 {
				return false
			}
			c, _, _ := w.(http.Hijacker).Hijack()
			c.(*net.TCPConn).SetLinger(0) // RST
			c.Close()
			return true
		}, 2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n.Store(0)
			fail = tc.fail
			obj, err := s.Put(context.Background(), "k", strings.NewReader("body"), 4, objstore.Condition{IfNoneMatch: true})
			if got := n.Load(); got != tc.tries {
				t.Errorf("%d requests, want %d", got, tc.tries)
			}
			switch {
			case tc.err == nil && (err != nil || obj.Version != `"0x9"`):
				t.Errorf("put: %+v, %v", obj, err)
			case tc.err != nil && err == nil:
				t.Errorf("put: no error")
			case tc.err != nil && tc.err.Error() != "" && !errors.Is(err, tc.err):
				t.Errorf("put: %v, want %v", err, tc.err)
			}
			noSecret(t, err, sig)
			if err != nil && (strings.Contains(err.Error(), "RequestId") || strings.Contains(err.Error(), "Time:")) {
				t.Errorf("the message keeps the service's RequestId and Time lines: %v", err)
			}
		})
	}
}

// TestTransportErrorHidesSAS checks that an error with no answer (a
// closed port) shows neither the SAS nor the URL that carries it.
func TestTransportErrorHidesSAS(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	const sig = "c2VjcmV0c2lnbmF0dXJl"
	s, err := New("ctr", objstore.Credentials{SessionToken: "sv=2021-08-06&sig=" + sig, Endpoint: "http://" + addr}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for op, err := range allOps(s, "k") {
		if err == nil {
			t.Errorf("%s on a closed port: no error", op)
			continue
		}
		noSecret(t, err, sig, "sv=")
		var e *objstore.Error
		if !errors.As(err, &e) || e.Op != op {
			t.Errorf("%s: %v is not an *objstore.Error of that op", op, err)
		}
	}
}

// TestListNotXML checks that a page that is not XML ends List with an
// error of its own.
func TestListNotXML(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "not xml")
	}))
	defer srv.Close()
	s, err := New("ctr", objstore.Credentials{AccountName: "acct", AccountKey: devKey, Endpoint: srv.URL}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = s.List(context.Background(), "", func(objstore.Object) error { return nil })
	var e *objstore.Error
	if !errors.As(err, &e) || e.Op != "list" {
		t.Errorf("list of a body that is not XML: %v", err)
	}
}
