package integration

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/internal/azuritetest"
	"github.com/toolhost/toolhost/objstore"
	"github.com/toolhost/toolhost/objstore/azblob"
	"github.com/toolhost/toolhost/protocol"
)

// writeSecrets writes a --secrets file (0600) holding secrets (id → the
// secret's fields).
func writeSecrets(t testing.TB, secrets map[string]map[string]string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secrets.json")
	b, err := json.Marshal(secrets)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startMountedURI starts toolhost with uri mounted as "data" at ROOT/data
// under the secret id, its state in a directory of the test's; mountFlags
// follow the mount's keys (",rw"), extra flags the rest.
func startMountedURI(t *testing.T, secrets, uri, id, mountFlags string, extra ...string) *server {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--state-dir", privateDir(t), "--secrets", secrets,
		"--mount", "name=data,path=" + filepath.Join(root, "data") + ",uri=" + uri + ",secret=" + id + mountFlags}, extra...)
	return start(t, options{root: root, args: args})
}

// gcsServer is fake-gcs-server in the test process behind a check of the
// bearer token: a request without the token is refused 401, and counted.
type gcsServer struct {
	t    testing.TB
	fake *fakestorage.Server
	url  string
	// unauthorized counts the requests refused for their token.
	unauthorized atomic.Int64
}

// newGCSServer starts fake-gcs-server with the bucket "bkt" holding
// objects (key → content), asking every request for token.
func newGCSServer(t testing.TB, token string, objects map[string]string) *gcsServer {
	t.Helper()
	fake, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", NoListener: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Stop)
	fake.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "bkt"})
	g := &gcsServer{t: t, fake: fake}
	h := fake.HTTPHandler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			g.unauthorized.Add(1)
			http.Error(w, `{"error":{"code":401,"message":"Invalid Credentials"}}`, http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	g.url = ts.URL
	for k, v := range objects {
		fake.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "bkt", Name: k}, Content: []byte(v)})
	}
	return g
}

// objects returns every object of the bucket (key → content), through
// fakestorage's own API.
func (g *gcsServer) objects() map[string]string {
	g.t.Helper()
	attrs, _, err := g.fake.ListObjectsWithOptions("bkt", fakestorage.ListOptions{})
	if err != nil {
		g.t.Fatal(err)
	}
	got := map[string]string{}
	for _, a := range attrs {
		o, err := g.fake.GetObject("bkt", a.Name)
		if err != nil {
			g.t.Fatal(err)
		}
		got[a.Name] = string(o.Content)
	}
	return got
}

// TestMountGCSReadAndWriteBack mounts gs://bkt/data (fake-gcs-server, its
// JSON API, asking for the secret's token) writable: a command reads the
// objects under the prefix (a folder: never data-old/), writes a new one,
// changes one and deletes one; the result counts them and the bucket
// holds exactly the command's view afterwards.
func TestMountGCSReadAndWriteBack(t *testing.T) {
	needMounts(t)
	t.Parallel()
	g := newGCSServer(t, plantedToken, map[string]string{
		"data/a.txt": "alpha", "data/sub/b.txt": "beta", "data/c.txt": "gamma", "data-old/x.txt": "old", "other/y": "y",
	})
	secrets := writeSecrets(t, map[string]map[string]string{"g": {"sessionToken": plantedToken, "endpoint": g.url}})
	s := startMountedURI(t, secrets, "gs://bkt/data", "g", ",rw")
	init := s.initialize(nil)
	if !init.Capabilities.Mounts.GCS {
		t.Errorf("capabilities.mounts %+v, want gcs", init.Capabilities.Mounts)
	}
	readAndWriteBack(t, s)
	wantBucket := map[string]string{"data/a.txt": "changed\n", "data/sub/b.txt": "beta", "data/n.txt": "new\n", "data-old/x.txt": "old", "other/y": "y"}
	if diff := cmp.Diff(wantBucket, g.objects()); diff != "" {
		t.Errorf("the bucket after the write-back mismatch (-want +got):\n%s", diff)
	}
	if n := g.unauthorized.Load(); n != 0 {
		t.Errorf("%d requests came without the secret's token", n)
	}
	// The bucket's own change shows in the next command, and readFile
	// reads the mounted file.
	g.fake.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "bkt", Name: "data/sub/b.txt"}, Content: []byte("beta2")})
	if r := s.sh("cat data/sub/b.txt data/n.txt"); r.Stdout != "beta2new\n" {
		t.Errorf("after the bucket changed the next command saw %q (stderr %q)", r.Stdout, r.Stderr)
	}
	var rf protocol.ReadFileResult
	s.mustCall("readFile", map[string]any{"path": "data/a.txt"}, &rf)
	if rf.Content != "changed\n" {
		t.Errorf("readFile of a mounted file: %q", rf.Content)
	}
	if strings.Contains(s.wire(), plantedToken) || strings.Contains(s.stderr.String(), plantedToken) {
		t.Errorf("the token appears on the wire or in the server's log")
	}
}

// azureContainer makes a container in Azurite (Create Container, which
// toolhost never does) with a Shared Key request signed here: the
// string to sign of learn.microsoft.com/rest/api/storageservices/
// authorize-with-shared-key, with no standard header set.
func azureContainer(t testing.TB, srv *azuritetest.Server, name string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, srv.Endpoint+"/"+name+"?restype=container", nil)
	if err != nil {
		t.Fatal(err)
	}
	date := time.Now().UTC().Format(http.TimeFormat)
	const version = "2021-08-06"
	req.Header.Set("x-ms-date", date)
	req.Header.Set("x-ms-version", version)
	sts := http.MethodPut + strings.Repeat("\n", 12) +
		"x-ms-date:" + date + "\nx-ms-version:" + version + "\n" +
		"/" + srv.AccountName + req.URL.EscapedPath() + "\nrestype:container"
	key, err := base64.StdEncoding.DecodeString(srv.AccountKey)
	if err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(sts))
	req.Header.Set("Authorization", "SharedKey "+srv.AccountName+":"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("Create Container %s: %s %s", name, resp.Status, b)
	}
}

// azureObjects returns every blob of the store (key → content).
func azureObjects(t testing.TB, st *azblob.Store) map[string]string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	if err := st.List(ctx, "", func(o objstore.Object) error { keys = append(keys, o.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, k := range keys {
		rc, _, err := st.Open(ctx, k, "")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		got[k] = string(b)
	}
	return got
}

// TestMountAzureReadAndWriteBack mounts az://container/data of a real
// Azurite writable: a command reads the blobs under the prefix, writes a
// new one, changes one and deletes one; the result counts them and the
// container holds exactly the command's view afterwards.
func TestMountAzureReadAndWriteBack(t *testing.T) {
	needMounts(t)
	t.Parallel()
	srv := azuritetest.Start(t)
	azureContainer(t, srv, "container")
	creds := objstore.Credentials{AccountName: srv.AccountName, AccountKey: srv.AccountKey, Endpoint: srv.Endpoint}
	st, err := azblob.New("container", creds, azblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	put := func(k, v string) {
		t.Helper()
		if _, err := st.Put(context.Background(), k, strings.NewReader(v), int64(len(v)), objstore.Condition{}); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	for k, v := range map[string]string{"data/a.txt": "alpha", "data/sub/b.txt": "beta", "data/c.txt": "gamma", "data-old/x.txt": "old"} {
		put(k, v)
	}
	secrets := writeSecrets(t, map[string]map[string]string{"a": {"accountName": srv.AccountName, "accountKey": srv.AccountKey, "endpoint": srv.Endpoint}})
	s := startMountedURI(t, secrets, "az://container/data", "a", ",rw")
	init := s.initialize(nil)
	if !init.Capabilities.Mounts.AzureBlob {
		t.Errorf("capabilities.mounts %+v, want azureBlob", init.Capabilities.Mounts)
	}
	readAndWriteBack(t, s)
	wantBucket := map[string]string{"data/a.txt": "changed\n", "data/sub/b.txt": "beta", "data/n.txt": "new\n", "data-old/x.txt": "old"}
	if diff := cmp.Diff(wantBucket, azureObjects(t, st)); diff != "" {
		t.Errorf("the container after the write-back mismatch (-want +got):\n%s", diff)
	}
	// A blob changed in the container meanwhile is a conflict: it stays.
	h := s.longRun(map[string]any{"argv": []string{"sh", "-c", "echo mine > data/a.txt; echo ready; read x"}, "openStdin": true, "streamOutput": true})
	s.awaitOutput(h.HandleID, "ready")
	put("data/a.txt", "theirs")
	s.writeInput(h.HandleID, "go\n")
	res := s.toolResultOf(h.HandleID)
	want := []protocol.MountOutcome{{Name: "data", Conflicts: []string{"a.txt"}}}
	if diff := cmp.Diff(want, res.Mounts); diff != "" {
		t.Errorf("ToolResult.mounts of a conflict mismatch (-want +got):\n%s", diff)
	}
	if got := azureObjects(t, st)["data/a.txt"]; got != "theirs" {
		t.Errorf("the container's a.txt is %q after the conflict, want the container's own change kept", got)
	}
	for _, text := range []string{s.wire(), s.stderr.String()} {
		if strings.Contains(text, srv.AccountKey) {
			t.Errorf("the account key appears on the wire or in the server's log")
		}
	}
}

// TestMountR2 mounts r2://bkt/data read-only through the S3 server of
// the test (R2 speaks S3), its endpoint in the secret: a command sees the
// objects under the prefix and cannot write them; a secret without an
// endpoint (which R2 needs: it has no default) is refused at initialize.
func TestMountR2(t *testing.T) {
	needMounts(t)
	t.Parallel()
	bs := newBucketServer(t, map[string]string{"data/a.txt": "alpha", "data/sub/b.txt": "beta", "data-old/c.txt": "old"})
	secrets := writeSecrets(t, map[string]map[string]string{
		"r":     {"accessKeyId": plantedKeyID, "secretAccessKey": plantedSecret, "endpoint": bs.url},
		"noend": {"accessKeyId": plantedKeyID, "secretAccessKey": plantedSecret},
	})
	s := startMountedURI(t, secrets, "r2://bkt/data", "r", "")
	init := s.initialize(nil)
	if !init.Capabilities.Mounts.R2 {
		t.Errorf("capabilities.mounts %+v, want r2", init.Capabilities.Mounts)
	}
	res := s.sh("cat data/a.txt data/sub/b.txt; echo; ls -R data | tr '\\n' ' '")
	if want := "alphabeta\ndata: a.txt sub  data/sub: b.txt "; !res.Success || res.Stdout != want {
		t.Fatalf("the mount shows %q (%s, stderr %q), want %q", res.Stdout, res.Status, res.Stderr, want)
	}
	if r := s.sh("echo x > data/a.txt"); r.Success {
		t.Errorf("a write to a read-only r2 mount succeeded")
	}
	if got, _ := bs.get("data/a.txt"); got != "alpha" {
		t.Errorf("the bucket's data/a.txt is %q, want alpha", got)
	}
	var list protocol.MountList
	s.mustCall("mounts", map[string]any{}, &list)
	if len(list) != 1 || list[0].Intent.Kind != protocol.MountR2 || list[0].Intent.URI != "r2://bkt/data" || !list[0].ReadOnly || list[0].Objects != 2 {
		t.Errorf("mounts answered %+v", list)
	}

	noEnd := startMountedURI(t, secrets, "r2://bkt/data", "noend", "")
	e := noEnd.initializeErr(nil)
	if e == nil || !strings.Contains(e.Message, "endpoint") {
		t.Errorf("an r2 mount whose secret has no endpoint: %v, want an error naming the endpoint", e)
	}
	for _, text := range []string{s.wire(), noEnd.wire(), s.stderr.String(), noEnd.stderr.String()} {
		if bytes.Contains([]byte(text), []byte(plantedSecret)) {
			t.Errorf("the planted secret appears on the wire or in a log")
		}
	}
}

// readAndWriteBack reads a mount of data/a.txt, data/sub/b.txt and
// data/c.txt (alpha, beta, gamma) at data, and changes it: n.txt added,
// a.txt changed, c.txt deleted; the result must say two uploads and one
// delete.
func readAndWriteBack(t *testing.T, s *server) {
	t.Helper()
	res := s.sh("cat data/a.txt data/sub/b.txt data/c.txt; echo; ls -R data | tr '\\n' ' '; echo; " +
		"echo new > data/n.txt && echo changed > data/a.txt && rm data/c.txt")
	if want := "alphabetagamma\ndata: a.txt c.txt sub  data/sub: b.txt \n"; !res.Success || res.Stdout != want {
		t.Fatalf("the mount shows %q (%s, stderr %q), want %q", res.Stdout, res.Status, res.Stderr, want)
	}
	want := []protocol.MountOutcome{{Name: "data", Uploaded: 2, Deleted: 1, Conflicts: []string{}}}
	if diff := cmp.Diff(want, res.Mounts); diff != "" {
		t.Errorf("ToolResult.mounts mismatch (-want +got):\n%s", diff)
	}
}
