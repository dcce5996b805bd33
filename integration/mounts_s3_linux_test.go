package integration

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/toolhost/toolhost/protocol"
)

// The planted credentials of the mount tests: each must appear nowhere a
// command or a client can see.
const (
	plantedKeyID  = "AKIDPLANTEDKEYID4242"
	plantedSecret = "planted-secret-access-key-9f3c1a"
	plantedToken  = "planted-session-token-77e0b5"
)

// bucketServer is an S3 server in the test process (gofakes3 on
// loopback), with its backend to change the bucket behind toolhost.
type bucketServer struct {
	t       testing.TB
	backend *s3mem.Backend
	url     string
}

// newBucketServer starts an S3 server holding the bucket "bkt" with
// objects (key → content).
func newBucketServer(t testing.TB, objects map[string]string) *bucketServer {
	t.Helper()
	b := s3mem.New()
	ts := httptest.NewServer(gofakes3.New(b).Server())
	t.Cleanup(ts.Close)
	if err := b.CreateBucket("bkt"); err != nil {
		t.Fatal(err)
	}
	bs := &bucketServer{t: t, backend: b, url: ts.URL}
	for k, v := range objects {
		bs.put(k, v)
	}
	return bs
}

// put writes an object behind toolhost's back.
func (bs *bucketServer) put(key, content string) {
	bs.t.Helper()
	if _, err := bs.backend.PutObject("bkt", key, map[string]string{}, strings.NewReader(content), int64(len(content)), nil); err != nil {
		bs.t.Fatalf("put %s: %v", key, err)
	}
}

// get returns an object's content, or ok false when it is missing.
func (bs *bucketServer) get(key string) (string, bool) {
	bs.t.Helper()
	o, err := bs.backend.GetObject("bkt", key, nil)
	if err != nil {
		return "", false
	}
	defer o.Contents.Close()
	b, err := io.ReadAll(o.Contents)
	if err != nil {
		bs.t.Fatal(err)
	}
	return string(b), true
}

// secretsFile writes a --secrets file (0600) naming the server as the
// endpoint of secret "t".
func (bs *bucketServer) secretsFile(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secrets.json")
	b, _ := json.Marshal(map[string]any{"t": map[string]string{
		"accessKeyId": plantedKeyID, "secretAccessKey": plantedSecret, "sessionToken": plantedToken,
		"endpoint": bs.url, "region": "us-east-1",
	}})
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// needMounts skips a test that needs a mount namespace (a server running
// as root), which binds a mount for a command.
func needMounts(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a mount is bound in the command's mount namespace, which needs a server running as root (CAP_SYS_ADMIN)")
	}
}

// startMounted starts toolhost with the bucket's prefix data/ mounted at
// ROOT/data, its state in a directory of the test's; extra flags follow.
func startMounted(t *testing.T, bs *bucketServer, mountFlags string, extra ...string) (*server, string) {
	t.Helper()
	state := privateDir(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--state-dir", state, "--secrets", bs.secretsFile(t),
		"--mount", "name=data,path=" + filepath.Join(root, "data") + ",uri=s3://bkt/data,secret=t" + mountFlags}, extra...)
	s := start(t, options{root: root, args: args})
	return s, state
}

// sh runs a shell script in the root and returns its result.
func (s *server) sh(script string) protocol.ToolResult {
	s.t.Helper()
	return s.run(map[string]any{"argv": []string{"sh", "-c", script}})
}

// TestMountS3ReadOnlyShowsTheBucketAsItWas checks that a read-only
// mount shows the objects under the prefix (a folder: never data-old/),
// that nothing can write it, that the next command sees the bucket's
// changes, and that readFile and mounts {} see them too.
func TestMountS3ReadOnlyShowsTheBucketAsItWas(t *testing.T) {
	needMounts(t)
	t.Parallel()
	bs := newBucketServer(t, map[string]string{"data/a.txt": "alpha", "data/sub/b.txt": "beta", "data-old/c.txt": "old", "other/x": "x"})
	s, _ := startMounted(t, bs, "")
	init := s.initialize(nil)
	if !init.Capabilities.Mounts.S3 || !init.Capabilities.Mounts.R2 || init.Capabilities.Mounts.BoxStorage || init.Capabilities.Mounts.ProviderNative {
		t.Errorf("capabilities.mounts %+v, want s3 and r2 and not boxStorage or providerNative", init.Capabilities.Mounts)
	}
	res := s.sh("cat data/a.txt data/sub/b.txt; echo; ls -R data | tr '\\n' ' '")
	if want := "alphabeta\ndata: a.txt sub  data/sub: b.txt "; !res.Success || res.Stdout != want {
		t.Fatalf("the mount shows %q (%s, stderr %q), want %q", res.Stdout, res.Status, res.Stderr, want)
	}
	for _, script := range []string{"echo x > data/a.txt", "echo x > data/new.txt", "rm data/a.txt", "mv data/a.txt data/z.txt", "touch data/a.txt", "chmod 777 data/a.txt", "mkdir data/d"} {
		if r := s.sh(script); r.Success {
			t.Errorf("%q in a read-only mount succeeded", script)
		}
	}
	if got, _ := bs.get("data/a.txt"); got != "alpha" {
		t.Errorf("the bucket's data/a.txt is %q after the refused writes, want alpha", got)
	}
	bs.put("data/a.txt", "alpha2")
	bs.backend.DeleteObject("bkt", "data/sub/b.txt")
	bs.put("data/c.txt", "gamma")
	if res := s.sh("cat data/a.txt data/c.txt; test -e data/sub/b.txt || echo gone"); res.Stdout != "alpha2gammagone\n" {
		t.Errorf("after the bucket changed the next command saw %q (stderr %q), want the change", res.Stdout, res.Stderr)
	}
	var rf protocol.ReadFileResult
	s.mustCall("readFile", map[string]any{"path": "data/a.txt"}, &rf)
	if rf.Content != "alpha2" || rf.Path != filepath.Join(s.root, "data", "a.txt") {
		t.Errorf("readFile of a mounted file: path %q content %q", rf.Path, rf.Content)
	}
	var list protocol.MountList
	s.mustCall("mounts", map[string]any{}, &list)
	if len(list) != 1 || list[0].Name != "data" || !list[0].Fetched || list[0].Objects != 2 || !list[0].ReadOnly || list[0].Intent.URI != "s3://bkt/data" || list[0].Intent.Credentials == nil || list[0].Intent.Credentials.ID != "t" {
		t.Errorf("mounts answered %+v", list)
	}
}

// TestMountS3WriteBack checks that a writable mount's new, changed and
// deleted files are written back when the command ends, that what an
// object store cannot hold (a symlink) is named and left alone, and that
// a command that changes nothing writes nothing.
func TestMountS3WriteBack(t *testing.T) {
	needMounts(t)
	t.Parallel()
	bs := newBucketServer(t, map[string]string{"data/a.txt": "alpha", "data/sub/b.txt": "beta"})
	s, _ := startMounted(t, bs, ",rw")
	s.initialize(nil)
	res := s.sh("echo new > data/n.txt && echo changed > data/a.txt && rm data/sub/b.txt && ln -s a.txt data/link")
	if !res.Success {
		t.Fatalf("the command failed: %s %q", res.Status, res.Stderr)
	}
	want := []protocol.MountOutcome{{Name: "data", Uploaded: 2, Deleted: 1, Conflicts: []string{}, NotUploaded: []protocol.MountRefusal{{Path: "link"}}}}
	if diff := cmp.Diff(want, res.Mounts, cmpopts.IgnoreFields(protocol.MountRefusal{}, "Reason")); diff != "" {
		t.Errorf("ToolResult.mounts mismatch (-want +got):\n%s", diff)
	}
	for key, content := range map[string]string{"data/n.txt": "new\n", "data/a.txt": "changed\n"} {
		if got, ok := bs.get(key); !ok || got != content {
			t.Errorf("the bucket's %s is %q (exists %v), want %q", key, got, ok, content)
		}
	}
	if _, ok := bs.get("data/sub/b.txt"); ok {
		t.Errorf("data/sub/b.txt is still in the bucket")
	}
	if _, ok := bs.get("data/link"); ok {
		t.Errorf("the symlink was uploaded")
	}
	res = s.sh("cat data/n.txt")
	if res.Stdout != "new\n" || len(res.Mounts) != 1 || res.Mounts[0].Uploaded != 0 || res.Mounts[0].Deleted != 0 {
		t.Errorf("a command that changes nothing: stdout %q mounts %+v", res.Stdout, res.Mounts)
	}
	var out protocol.MountOutcome
	s.mustCall("syncMount", map[string]any{"name": "data"}, &out)
	if out.Name != "data" || out.Uploaded != 0 {
		t.Errorf("syncMount with nothing changed: %+v", out)
	}
	if e := s.call("syncMount", map[string]any{"name": "nope"}, nil); e == nil || e.Code != protocol.CodeInvalidParams {
		t.Errorf("syncMount of an unknown mount: %v, want -32602", e)
	}
}

// TestMountS3ConflictKeepsBoth checks that an object changed in the
// bucket while a command changed it too is a conflict: the bucket's
// object stays, the local copy is kept, and the result names it.
func TestMountS3ConflictKeepsBoth(t *testing.T) {
	needMounts(t)
	t.Parallel()
	bs := newBucketServer(t, map[string]string{"data/a.txt": "alpha", "data/b.txt": "beta"})
	s, _ := startMounted(t, bs, ",rw")
	s.initialize(nil)
	h := s.longRun(map[string]any{"argv": []string{"sh", "-c", "echo mine > data/a.txt; echo also > data/b.txt; echo ready; read x"}, "openStdin": true, "streamOutput": true})
	s.awaitOutput(h.HandleID, "ready")
	bs.put("data/a.txt", "theirs")
	s.writeInput(h.HandleID, "go\n")
	res := s.toolResultOf(h.HandleID)
	want := []protocol.MountOutcome{{Name: "data", Uploaded: 1, Conflicts: []string{"a.txt"}}}
	if diff := cmp.Diff(want, res.Mounts); diff != "" {
		t.Errorf("ToolResult.mounts mismatch (-want +got):\n%s", diff)
	}
	if got, _ := bs.get("data/a.txt"); got != "theirs" {
		t.Errorf("the bucket's a.txt is %q, want the bucket's own change kept", got)
	}
	if got, _ := bs.get("data/b.txt"); got != "also\n" {
		t.Errorf("the bucket's b.txt is %q, want the command's change written", got)
	}
	if r := s.sh("cat data/a.txt"); r.Stdout != "mine\n" {
		t.Errorf("the local copy of the conflict is %q, want it kept", r.Stdout)
	}
}

// TestMountSecretsNeverSeen plants credentials (in --secrets and in
// TOOLHOST_SECRET_ENVSECRET) and checks they appear nowhere a command or
// a client can see: a command's environment and argv (and every process
// it can see), the secrets file, the state directory that holds the
// mounts' cache, the root, the artifacts, the wire, the server's log, and
// the error of a bucket that does not exist.
func TestMountSecretsNeverSeen(t *testing.T) {
	needMounts(t)
	t.Parallel()
	bs := newBucketServer(t, map[string]string{"data/a.txt": "alpha"})
	state := privateDir(t)
	root, _ := filepath.EvalSymlinks(t.TempDir())
	// The secrets file in the root, where a user who works in $HOME
	// keeps it: no command and no file door may read it all the same.
	secrets := filepath.Join(root, ".toolhost-secrets.json")
	if err := os.Rename(bs.secretsFile(t), secrets); err != nil {
		t.Fatal(err)
	}
	envSecret, _ := json.Marshal(map[string]string{"accessKeyId": plantedKeyID, "secretAccessKey": plantedSecret, "endpoint": bs.url})
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir(), "TOOLHOST_SECRET_ENVSECRET=" + string(envSecret)}
	s := start(t, options{root: root, env: env, args: []string{"--state-dir", state, "--secrets", secrets,
		"--mount", "name=data,path=" + filepath.Join(root, "data") + ",uri=s3://bkt/data,secret=t,rw",
		"--mount", "name=env,path=" + filepath.Join(root, "env") + ",uri=s3://bkt/data,secret=envsecret",
	}})
	// Every variable of the server's environment is allowed: the secret's
	// must still stay out.
	s.initialize(&protocol.InitializeParams{InitializationOptions: &protocol.InitializationOptions{Env: &protocol.EnvOptions{Allow: []string{"*"}}}})
	sweep := `env; cat /proc/*/environ /proc/*/cmdline; echo; ps -eo args; ` +
		`cat ` + secrets + `; ls -laR ` + state + ` ` + filepath.Dir(secrets) + `; cat $(find ` + state + ` -type f); ` +
		`grep -r . ` + state + ` ` + filepath.Dir(secrets) + ` ` + root + `; cat env/a.txt data/a.txt; true`
	res := s.run(map[string]any{"argv": []string{"sh", "-c", sweep}})
	if !strings.Contains(res.Stdout, "alpha") {
		t.Fatalf("the sweep did not read the mounts: %s, stdout %q, stderr %q", res.Status, res.Stdout, res.Stderr)
	}
	out, err := os.ReadFile(res.Artifacts.OutputPath)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.sh("cat " + secrets); r.Stdout != "" {
		t.Errorf("a command read the secrets file (masked by an empty file): %q", r.Stdout)
	}
	e0 := s.call("readFile", map[string]any{"path": secrets}, nil)
	if e0 == nil || e0.Code != protocol.CodePathOutsideWorkspace || errData(e0).Policy != "denyRead" {
		t.Errorf("readFile of the secrets file: %v (data %+v), want -32001 by policy", e0, errData(e0))
	}
	e1 := s.call("writeFile", map[string]any{"path": secrets, "content": "{}"}, nil)
	if e1 == nil || e1.Code != protocol.CodePathOutsideWorkspace || errData(e1).Policy != "denyRead" {
		t.Errorf("writeFile of the secrets file: %v (data %+v), want -32001 by policy", e1, errData(e1))
	}
	// No snapshot holds it: the export of one has neither its name nor
	// its keys.
	var snap protocol.SnapshotInfo
	s.mustCall("snapshot", map[string]any{}, &snap)
	var exp protocol.ExportSnapshotResult
	s.mustCall("exportSnapshot", map[string]any{"snapshotId": snap.SnapshotID}, &exp)
	tarball, err := os.ReadFile(exp.Path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(tarball), ".toolhost-secrets.json") || !strings.Contains(string(tarball), "\x00") {
		t.Errorf("the snapshot's export holds the secrets file (or is not a tar)")
	}
	if r := s.sh("ls -A " + state + " " + filepath.Join(state, "mounts") + " | tr '\\n' ' '"); strings.Contains(r.Stdout, "snapshots") || strings.Contains(r.Stdout, "record") {
		t.Errorf("a command lists the state directory: %q", r.Stdout)
	}
	// A bucket that does not exist: its error names it, in the
	// provider's words, and no secret.
	s2 := start(t, options{args: []string{"--state-dir", privateDir(t), "--secrets", secrets,
		"--mount", "name=missing,path=" + filepath.Join(t.TempDir(), "m") + ",uri=s3://nobucket/x,secret=t"}})
	s2.initialize(nil)
	e := s2.call("runCommand", map[string]any{"argv": []string{"true"}}, nil)
	if e == nil || e.Code != protocol.CodeMountFailed || errData(e).Name != "missing" || errData(e).Kind != "s3" || !strings.Contains(errData(e).Reason, "NoSuchBucket") {
		t.Errorf("a command with a missing bucket mounted: %v (data %+v), want -32035 naming it with the provider's words", e, errData(e))
	}
	var list protocol.MountList
	s2.mustCall("mounts", map[string]any{}, &list) // the session goes on
	if len(list) != 1 || list[0].Fetched || !strings.Contains(list[0].Error, "NoSuchBucket") {
		t.Errorf("mounts after the failed fetch: %+v, want the error", list)
	}
	places := map[string]string{
		"the command's output":  res.Stdout + res.Stderr,
		"the output artifact":   string(out),
		"the snapshot's export": string(tarball),
		"the wire":              s.wire() + s2.wire(),
		"the server's log":      s.stderr.String() + s2.stderr.String(),
	}
	for where, text := range places {
		for _, planted := range []string{plantedKeyID, plantedSecret, plantedToken} {
			if strings.Contains(text, planted) {
				t.Errorf("the planted %q appears in %s", planted, where)
			}
		}
	}
}

// wire returns every message the server sent, as sent.
func (s *server) wire() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, m := range s.msgs {
		b.Write(m.raw)
		b.WriteByte('\n')
	}
	return b.String()
}

// privateDir returns a new directory of the test's, mode 0700: a state
// directory toolhost accepts.
func privateDir(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	if err := os.Chmod(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}
