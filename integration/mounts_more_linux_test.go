package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolhost/toolhost/protocol"
)

// writeFiles writes files (path relative to dir → content), making their
// directories.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readIn returns a file's content, or "<missing>" when it cannot be read.
func readIn(dir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return "<missing>"
	}
	return string(b)
}

// TestMountSnapshotsLeaveMountsOut checks that snapshots leave a
// writable mount inside the root out: a command's changes (snapshot:
// true) and diff name the root's changes and nothing under the mount, and
// restore undoes the root's changes and leaves the mount's files (its
// working copy, and so the bucket) as the command left them.
func TestMountSnapshotsLeaveMountsOut(t *testing.T) {
	needMounts(t)
	t.Parallel()
	bs := newBucketServer(t, map[string]string{"data/a.txt": "alpha", "data/b.txt": "beta"})
	s, _ := startMounted(t, bs, ",rw")
	writeFiles(t, s.root, map[string]string{"edit.txt": "before\n", "keep.txt": "same\n"})
	if init := s.initialize(nil); !init.Capabilities.Snapshots {
		t.Fatal("initialize does not say snapshots")
	}
	// A first command fetches the mount: its working copy exists when
	// the snapshot is taken.
	if r := s.sh("cat data/a.txt"); r.Stdout != "alpha" {
		t.Fatalf("the mount shows %q (%s, stderr %q)", r.Stdout, r.Status, r.Stderr)
	}
	var snap protocol.SnapshotInfo
	s.mustCall("snapshot", map[string]any{"label": "before"}, &snap)
	if snap.Files != 2 {
		t.Errorf("the snapshot holds %d files, want the root's 2 (edit.txt, keep.txt) and none of the mount's", snap.Files)
	}
	res := s.run(map[string]any{"argv": []string{"sh", "-c",
		"echo mine > data/a.txt && rm data/b.txt && echo new > data/n.txt && echo after > edit.txt && echo made > made.txt"}, "snapshot": true})
	if !res.Success {
		t.Fatalf("the command failed: %s %q", res.Status, res.Stderr)
	}
	wantChanges := []protocol.Change{
		{Path: "edit.txt", Kind: protocol.ChangeModified, Size: 6},
		{Path: "made.txt", Kind: protocol.ChangeAdded, Size: 5},
	}
	if diff := cmp.Diff(wantChanges, res.Changes); diff != "" {
		t.Errorf("the command's changes mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]protocol.MountOutcome{{Name: "data", Uploaded: 2, Deleted: 1, Conflicts: []string{}}}, res.Mounts); diff != "" {
		t.Errorf("ToolResult.mounts mismatch (-want +got):\n%s", diff)
	}
	var d protocol.DiffResult
	s.mustCall("diff", map[string]any{"from": snap.SnapshotID}, &d)
	if diff := cmp.Diff(wantChanges, d.Changes); diff != "" {
		t.Errorf("diff from the snapshot mismatch (-want +got):\n%s", diff)
	}
	var r protocol.RestoreResult
	s.mustCall("restore", map[string]any{"snapshotId": snap.SnapshotID}, &r)
	got := map[string]string{"edit.txt": readIn(s.root, "edit.txt"), "keep.txt": readIn(s.root, "keep.txt"), "made.txt": readIn(s.root, "made.txt")}
	if diff := cmp.Diff(map[string]string{"edit.txt": "before\n", "keep.txt": "same\n", "made.txt": "<missing>"}, got); diff != "" {
		t.Errorf("the root after the restore mismatch (-want +got):\n%s", diff)
	}
	// The mount is as the command left it: the next command sees its
	// files, and writes nothing back (nothing of the mount changed).
	next := s.sh("cat data/a.txt data/n.txt; test -e data/b.txt || echo b gone")
	if want := "mine\nnew\nb gone\n"; next.Stdout != want {
		t.Errorf("after the restore the mount shows %q (stderr %q), want %q", next.Stdout, next.Stderr, want)
	}
	if diff := cmp.Diff([]protocol.MountOutcome{{Name: "data", Conflicts: []string{}}}, next.Mounts); diff != "" {
		t.Errorf("the write-back after the restore mismatch (-want +got):\n%s", diff)
	}
	bucket := map[string]string{}
	for _, k := range []string{"data/a.txt", "data/b.txt", "data/n.txt"} {
		if v, ok := bs.get(k); ok {
			bucket[k] = v
		}
	}
	if diff := cmp.Diff(map[string]string{"data/a.txt": "mine\n", "data/n.txt": "new\n"}, bucket); diff != "" {
		t.Errorf("the bucket after the restore mismatch (-want +got):\n%s", diff)
	}
	s.mustCall("diff", map[string]any{"from": snap.SnapshotID}, &d)
	if len(d.Changes) != 0 {
		t.Errorf("diff after the restore: %+v, want none", d.Changes)
	}
}

// TestMountSnapshotFromBeforeTheMount restores, in a session with a
// mount, a snapshot of the same root taken by an earlier session with
// none (the mount point did not exist then): diff does not name the mount
// point as added, and restore does not remove it, so the next command
// still sees the bucket.
func TestMountSnapshotFromBeforeTheMount(t *testing.T) {
	needMounts(t)
	t.Parallel()
	bs := newBucketServer(t, map[string]string{"data/a.txt": "alpha"})
	state := privateDir(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, root, map[string]string{"edit.txt": "before\n"})
	plain := start(t, options{root: root, args: []string{"--state-dir", state}})
	plain.initialize(nil)
	var snap protocol.SnapshotInfo
	plain.mustCall("snapshot", map[string]any{"label": "no mount yet"}, &snap)
	plain.shutdown()

	s := start(t, options{root: root, args: []string{"--state-dir", state, "--secrets", bs.secretsFile(t),
		"--mount", "name=data,path=" + filepath.Join(root, "data") + ",uri=s3://bkt/data,secret=t,rw"}})
	s.initialize(nil)
	if r := s.sh("cat data/a.txt && echo mine > data/m.txt && echo after > edit.txt"); r.Stdout != "alpha" {
		t.Fatalf("the mount shows %q (%s, stderr %q)", r.Stdout, r.Status, r.Stderr)
	}
	var d protocol.DiffResult
	s.mustCall("diff", map[string]any{"from": snap.SnapshotID}, &d)
	if diff := cmp.Diff([]protocol.Change{{Path: "edit.txt", Kind: protocol.ChangeModified, Size: 6}}, d.Changes); diff != "" {
		t.Errorf("diff from the snapshot before the mount mismatch (-want +got):\n%s", diff)
	}
	var r protocol.RestoreResult
	s.mustCall("restore", map[string]any{"snapshotId": snap.SnapshotID}, &r)
	if got := readIn(root, "edit.txt"); got != "before\n" {
		t.Errorf("edit.txt after the restore is %q", got)
	}
	next := s.sh("cat data/a.txt data/m.txt")
	if next.Stdout != "alphamine\n" {
		t.Errorf("after the restore the mount shows %q (%s, stderr %q), want its files", next.Stdout, next.Status, next.Stderr)
	}
	if diff := cmp.Diff([]protocol.MountOutcome{{Name: "data", Conflicts: []string{}}}, next.Mounts); diff != "" {
		t.Errorf("the write-back after the restore mismatch (-want +got):\n%s", diff)
	}
	if got, _ := bs.get("data/m.txt"); got != "mine\n" {
		t.Errorf("the bucket's data/m.txt is %q after the restore, want it kept", got)
	}
}

// TestMountManifestEntries checks initializationOptions.manifest: a
// command sees each entry's source at its target (outside the root), a
// read-only entry refuses every write, a writable one's writes land in
// its source; a source outside the root and the read roots, and a
// writable one in a read root, are refused -32602. No bucket and no
// state directory are needed.
func TestMountManifestEntries(t *testing.T) {
	needMounts(t)
	t.Parallel()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	readRoot, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, root, map[string]string{"ro/r.txt": "read me\n", "rw/w.txt": "write me\n"})
	writeFiles(t, readRoot, map[string]string{"doc.txt": "docs\n"})
	targets, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	roT, rwT, docT := filepath.Join(targets, "ro"), filepath.Join(targets, "rw"), filepath.Join(targets, "docs")
	s := start(t, options{root: root, args: []string{"--read-root", readRoot}})
	s.initialize(&protocol.InitializeParams{InitializationOptions: &protocol.InitializationOptions{Manifest: &protocol.Manifest{Entries: []protocol.ManifestEntry{
		{Source: filepath.Join(root, "ro"), Target: roT},
		{Source: filepath.Join(root, "rw"), Target: rwT, Writable: true},
		{Source: readRoot, Target: docT},
	}}}})
	res := s.sh("cat " + roT + "/r.txt " + rwT + "/w.txt " + docT + "/doc.txt && echo new > " + rwT + "/n.txt && echo changed > " + rwT + "/w.txt")
	if want := "read me\nwrite me\ndocs\n"; !res.Success || res.Stdout != want {
		t.Fatalf("the entries show %q (%s, stderr %q), want %q", res.Stdout, res.Status, res.Stderr, want)
	}
	got := map[string]string{"rw/n.txt": readIn(root, "rw/n.txt"), "rw/w.txt": readIn(root, "rw/w.txt")}
	if diff := cmp.Diff(map[string]string{"rw/n.txt": "new\n", "rw/w.txt": "changed\n"}, got); diff != "" {
		t.Errorf("the writable entry's source after the writes mismatch (-want +got):\n%s", diff)
	}
	for _, script := range []string{"echo x > " + roT + "/r.txt", "echo x > " + roT + "/new.txt", "rm " + roT + "/r.txt", "mkdir " + roT + "/d", "echo x > " + docT + "/doc.txt"} {
		if r := s.sh(script); r.Success {
			t.Errorf("%q in a read-only entry succeeded", script)
		}
	}
	if got := readIn(root, "ro/r.txt"); got != "read me\n" {
		t.Errorf("the read-only entry's source is %q after the refused writes", got)
	}
	if entries, _ := os.ReadDir(filepath.Join(root, "ro")); len(entries) != 1 {
		t.Errorf("the read-only entry's source holds %d entries, want its one file", len(entries))
	}

	outside, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		entry protocol.ManifestEntry
		field string
	}{
		{"source outside the roots", protocol.ManifestEntry{Source: outside, Target: filepath.Join(targets, "o")}, "source"},
		{"writable source in a read root", protocol.ManifestEntry{Source: readRoot, Target: filepath.Join(targets, "w"), Writable: true}, "source"},
		{"relative target", protocol.ManifestEntry{Source: filepath.Join(root, "ro"), Target: "rel"}, "target"},
	} {
		s2 := start(t, options{root: root, args: []string{"--read-root", readRoot}})
		e := s2.initializeErr(&protocol.InitializeParams{InitializationOptions: &protocol.InitializationOptions{Manifest: &protocol.Manifest{Entries: []protocol.ManifestEntry{c.entry}}}})
		if e == nil || e.Code != protocol.CodeInvalidParams || !strings.Contains(e.Message, c.field) {
			t.Errorf("%s: %v, want -32602 naming the %s", c.name, e, c.field)
		}
	}
}

// TestMountDestinationResolvesItsOwnSecrets runs a command on a
// destination whose toolhost has its own --secrets and --mount: the near
// server has no secrets and no mounts, and the command sees the far
// mount, writes it back, and readFile on the destination reads it.
func TestMountDestinationResolvesItsOwnSecrets(t *testing.T) {
	needMounts(t)
	t.Parallel()
	bs := newBucketServer(t, map[string]string{"data/a.txt": "alpha"})
	root := farRoot(t)
	far := dest{Name: "far", Root: root, Argv: []string{binary, "--root", root, "--state-dir", privateDir(t), "--secrets", bs.secretsFile(t),
		"--mount", "name=data,path=" + filepath.Join(root, "data") + ",uri=s3://bkt/data,secret=t,rw"}}
	s := startHub(t, []dest{far})
	s.initialize(nil)
	res := s.run(map[string]any{"destination": "far", "argv": []string{"sh", "-c", "cat data/a.txt && echo new > data/n.txt"}})
	if !res.Success || res.Stdout != "alpha" {
		t.Fatalf("the far command saw %q (%s, stderr %q), want the far mount's file", res.Stdout, res.Status, res.Stderr)
	}
	if diff := cmp.Diff([]protocol.MountOutcome{{Name: "data", Uploaded: 1, Conflicts: []string{}}}, res.Mounts); diff != "" {
		t.Errorf("the far command's ToolResult.mounts mismatch (-want +got):\n%s", diff)
	}
	if got, ok := bs.get("data/n.txt"); !ok || got != "new\n" {
		t.Errorf("the bucket's data/n.txt is %q (exists %v), want the far command's write", got, ok)
	}
	var rf protocol.ReadFileResult
	s.mustCall("readFile", map[string]any{"destination": "far", "path": "data/a.txt"}, &rf)
	if rf.Content != "alpha" {
		t.Errorf("readFile on the destination of a mounted file: %q", rf.Content)
	}
	for _, planted := range []string{plantedKeyID, plantedSecret, plantedToken} {
		if strings.Contains(s.wire(), planted) || strings.Contains(s.stderr.String(), planted) {
			t.Errorf("the planted %q appears on the near wire or in its log", planted)
		}
	}
}

// TestMountMCPReadFile drives `toolhost mcp` with the official SDK's
// client: the instructions name the mount and where it is, read_file
// reads a mounted file, and run_command sees it.
func TestMountMCPReadFile(t *testing.T) {
	needMounts(t)
	t.Parallel()
	bs := newBucketServer(t, map[string]string{"data/a.txt": "alpha\n", "data/sub/b.txt": "beta\n"})
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "data")
	// The secrets file in the root: neither read_file nor write_file
	// reaches it.
	secrets := filepath.Join(root, ".toolhost-secrets.json")
	if err := os.Rename(bs.secretsFile(t), secrets); err != nil {
		t.Fatal(err)
	}
	s := startMCP(t, mcpOptions{args: []string{"mcp", "--root", root, "--state-dir", privateDir(t), "--secrets", secrets,
		"--mount", "name=data,path=" + path + ",uri=s3://bkt/data,secret=t"}})
	instr := s.cs.InitializeResult().Instructions
	if !strings.Contains(instr, "data at "+path) || !strings.Contains(instr, "s3://bkt/data") {
		t.Errorf("the instructions do not list the mount by name and path (%s):\n%s", path, instr)
	}
	var rf protocol.ReadFileResult
	got := firstText(t, s.ok("read_file", map[string]any{"path": "data/sub/b.txt"}, &rf))
	if got != "beta\n" {
		t.Errorf("read_file of a mounted file: %q, want beta", got)
	}
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"read_file", map[string]any{"path": ".toolhost-secrets.json"}},
		{"write_file", map[string]any{"path": ".toolhost-secrets.json", "content": "{}"}},
	} {
		if e := s.toolErr(call.tool, call.args); e.Error.Code != protocol.CodePathOutsideWorkspace || e.Error.Data.Policy != "denyRead" {
			t.Errorf("%s of the secrets file: %+v, want -32001 by policy", call.tool, e.Error)
		}
	}
	var res protocol.ToolResult
	s.ok("run_command", map[string]any{"argv": []string{"sh", "-c", "cat data/a.txt data/sub/b.txt"}}, &res)
	if res.Stdout != "alpha\nbeta\n" {
		t.Errorf("run_command saw %q (%s, stderr %q)", res.Stdout, res.Status, res.Stderr)
	}
	for _, planted := range []string{plantedKeyID, plantedSecret, plantedToken} {
		if strings.Contains(instr, planted) {
			t.Errorf("the instructions hold the planted %q", planted)
		}
	}
}
