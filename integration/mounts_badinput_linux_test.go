package integration

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"net/http/httptest"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/toolhost/toolhost/protocol"
)

// TestMountFlagsRefused checks that a malformed --mount, an unsupported
// kind and a secrets file others may read stop the server before it
// serves, each with a message that says what is wrong and holds no
// secret.
func TestMountFlagsRefused(t *testing.T) {
	t.Parallel()
	bs := newBucketServer(t, nil)
	secrets := bs.secretsFile(t)
	open := filepath.Join(t.TempDir(), "open.json")
	b, _ := os.ReadFile(secrets)
	if err := os.WriteFile(open, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no bucket", []string{"--mount", "name=d,path=/tmp/d,uri=s3://"}, "bucket"},
		{"bad scheme", []string{"--mount", "name=d,path=/tmp/d,uri=ftp://b/x"}, "ftp"},
		{"unsupported kind", []string{"--mount", "name=d,path=/tmp/d,uri=box://b/x"}, "box"},
		{"relative path", []string{"--mount", "name=d,path=d,uri=s3://b/x"}, "absolute"},
		{"unknown key", []string{"--mount", "name=d,path=/tmp/d,uri=s3://b/x,color=red"}, "color"},
		{"same name twice", []string{"--mount", "name=d,path=/tmp/d,uri=s3://b/x", "--mount", "name=d,path=/tmp/e,uri=s3://b/y"}, "d"},
		{"nested paths", []string{"--mount", "name=d,path=/tmp/d,uri=s3://b/x", "--mount", "name=e,path=/tmp/d/e,uri=s3://b/y"}, "/tmp/d"},
		{"secrets readable by others", []string{"--secrets", open}, "mode"},
		{"secrets missing", []string{"--secrets", filepath.Join(t.TempDir(), "none.json")}, "no such file"},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			cmd := exec.Command(binary, append([]string{"--root", t.TempDir()}, c.args...)...)
			cmd.Stdin = strings.NewReader("")
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("toolhost %v started; want it refused", c.args)
			}
			if !strings.Contains(string(out), c.want) {
				t.Errorf("toolhost %v said %q; want it to name %q", c.args, out, c.want)
			}
			for _, planted := range []string{plantedKeyID, plantedSecret, plantedToken} {
				if strings.Contains(string(out), planted) {
					t.Errorf("its message holds the planted %q", planted)
				}
			}
		})
	}
}

// TestMountInitializeRefusals checks the refusals of initialize: an
// unknown secret id, a mount point over the root's own files, and a
// client's mounts without --client-mounts (with it, they replace the
// command line's). The session goes on after each in a new initialize.
func TestMountInitializeRefusals(t *testing.T) {
	needMounts(t)
	t.Parallel()
	bs := newBucketServer(t, map[string]string{"data/a.txt": "alpha"})
	secrets := bs.secretsFile(t)

	root, _ := filepath.EvalSymlinks(t.TempDir())
	s := start(t, options{root: root, args: []string{"--state-dir", privateDir(t), "--secrets", secrets,
		"--mount", "name=data,path=" + filepath.Join(root, "data") + ",uri=s3://bkt/data,secret=nope"}})
	e := s.initializeErr(nil)
	if e == nil || e.Code != protocol.CodeInvalidParams || !strings.Contains(e.Message, "nope") {
		t.Errorf("an unknown secret id: %v, want -32602 naming it", e)
	}

	root2, _ := filepath.EvalSymlinks(t.TempDir())
	os.MkdirAll(filepath.Join(root2, "data"), 0o755)
	os.WriteFile(filepath.Join(root2, "data", "mine.txt"), []byte("mine"), 0o644)
	s2 := start(t, options{root: root2, args: []string{"--state-dir", privateDir(t), "--secrets", secrets,
		"--mount", "name=data,path=" + filepath.Join(root2, "data") + ",uri=s3://bkt/data,secret=t"}})
	if e := s2.initializeErr(nil); e == nil || e.Code != protocol.CodeInvalidParams || !strings.Contains(e.Message, "root's own files") {
		t.Errorf("a mount over the root's files: %v, want -32602", e)
	}

	root3, _ := filepath.EvalSymlinks(t.TempDir())
	clientMount := &[]protocol.Mount{{Name: "c", Path: filepath.Join(root3, "c"), ReadOnly: true,
		Intent: protocol.MountIntent{Kind: protocol.MountS3, URI: "s3://bkt/data", Credentials: &protocol.MountCredentials{ID: "t"}}}}
	s3 := start(t, options{root: root3, args: []string{"--state-dir", privateDir(t), "--secrets", secrets}})
	if e := s3.initializeErr(&protocol.InitializeParams{InitializationOptions: &protocol.InitializationOptions{Mounts: clientMount}}); e == nil || e.Code != protocol.CodeInvalidParams || !strings.Contains(e.Message, "--client-mounts") {
		t.Errorf("a client's mount without --client-mounts: %v, want -32602 naming the flag", e)
	}
	s4 := start(t, options{root: root3, args: []string{"--state-dir", privateDir(t), "--secrets", secrets, "--client-mounts"}})
	s4.initialize(&protocol.InitializeParams{InitializationOptions: &protocol.InitializationOptions{Mounts: clientMount}})
	if r := s4.sh("cat c/a.txt"); r.Stdout != "alpha" {
		t.Errorf("a client's mount under --client-mounts shows %q (%s %q)", r.Stdout, r.Status, r.Stderr)
	}
}

// TestMountFetchFailures checks that a bucket over --mount-max-bytes is
// refused before anything is fetched, and that a connection that drops
// mid-fetch fails the start: the command does not run, and the next one
// sees the bucket whole once the network is back.
func TestMountFetchFailures(t *testing.T) {
	needMounts(t)
	t.Parallel()
	b := s3mem.New()
	b.CreateBucket("bkt")
	var gets, cut atomic.Int64
	fake := gofakes3.New(b).Server()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "" && strings.Contains(r.URL.Path, "/data/") {
			gets.Add(1)
			if cut.Load() > 0 {
				// Half the body, then the connection drops.
				w.Header().Set("Content-Length", "1000")
				w.WriteHeader(http.StatusOK)
				io.WriteString(w, strings.Repeat("h", 500))
				if hj, ok := w.(http.Hijacker); ok {
					c, _, _ := hj.Hijack()
					c.Close()
				}
				return
			}
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	bs := &bucketServer{t: t, backend: b, url: ts.URL}
	bs.put("data/a.txt", strings.Repeat("a", 1000))
	bs.put("data/b.txt", strings.Repeat("b", 1000))

	over, _ := startMounted(t, bs, "", "--mount-max-bytes", "1500")
	over.initialize(nil)
	e := over.call("runCommand", map[string]any{"argv": []string{"touch", "ran"}}, nil)
	if e == nil || e.Code != protocol.CodeMountFailed || !strings.Contains(errData(e).Reason, "1500") {
		t.Errorf("a bucket over --mount-max-bytes: %v (data %+v), want -32035 naming the limit", e, errData(e))
	}
	if n := gets.Load(); n != 0 {
		t.Errorf("%d objects were fetched for a bucket over its limit", n)
	}
	if _, err := os.Stat(filepath.Join(over.root, "ran")); err == nil {
		t.Errorf("the command ran")
	}

	s, _ := startMounted(t, bs, "")
	s.initialize(nil)
	if r := s.sh("wc -c < data/a.txt"); strings.TrimSpace(r.Stdout) != "1000" {
		t.Fatalf("the first fetch: %q %q", r.Stdout, r.Stderr)
	}
	bs.put("data/a.txt", strings.Repeat("A", 1000))
	cut.Store(1)
	e = s.call("runCommand", map[string]any{"argv": []string{"touch", "ran"}}, nil)
	if e == nil || e.Code != protocol.CodeMountFailed || errData(e).Name != "data" {
		t.Errorf("a fetch cut mid-body: %v (data %+v), want -32035", e, errData(e))
	}
	if _, err := os.Stat(filepath.Join(s.root, "ran")); err == nil {
		t.Errorf("the command ran though its mount could not be fetched")
	}
	cut.Store(0)
	if r := s.sh("head -c 3 data/a.txt"); r.Stdout != "AAA" {
		t.Errorf("once the network is back the command sees %q (%q), want the new object whole", r.Stdout, r.Stderr)
	}
}

// initializeErr sends initialize and returns its error answer, or nil
// when it succeeded.
func (s *server) initializeErr(params *protocol.InitializeParams) *protocol.Error {
	s.t.Helper()
	if params == nil {
		params = &protocol.InitializeParams{}
	}
	return s.call("initialize", params, nil)
}

// TestMountWrongKeys checks that a store that refuses the credentials
// fails the command's start with -32035 in the provider's words, naming
// neither the wrong key nor the right one, and that the session goes on.
func TestMountWrongKeys(t *testing.T) {
	needMounts(t)
	t.Parallel()
	const right, wrong = "right-token-3b1f0c9a", "wrong-token-77aa51e2"
	g := newGCSServer(t, right, map[string]string{"data/a.txt": "alpha"})
	secrets := writeSecrets(t, map[string]map[string]string{"g": {"sessionToken": wrong, "endpoint": g.url}})
	s := startMountedURI(t, secrets, "gs://bkt/data", "g", "")
	s.initialize(nil)
	e := s.call("runCommand", map[string]any{"argv": []string{"touch", "ran"}}, nil)
	if e == nil || e.Code != protocol.CodeMountFailed || errData(e).Kind != "gcs" || !strings.Contains(errData(e).Reason, "Invalid Credentials") {
		t.Fatalf("a mount whose keys the store refuses: %v (data %+v), want -32035 with the provider's words", e, errData(e))
	}
	if _, err := os.Stat(filepath.Join(s.root, "ran")); err == nil {
		t.Errorf("the command ran")
	}
	if g.unauthorized.Load() == 0 {
		t.Errorf("the store saw no refused request")
	}
	var list protocol.MountList
	s.mustCall("mounts", map[string]any{}, &list)
	for where, text := range map[string]string{"the wire": s.wire(), "the log": s.stderr.String()} {
		for _, k := range []string{right, wrong} {
			if strings.Contains(text, k) {
				t.Errorf("%s holds the key %q", where, k)
			}
		}
	}
}
