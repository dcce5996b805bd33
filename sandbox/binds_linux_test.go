//go:build linux

package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// files makes each file of contents (path: text, mode 0644) and the
// directories above it.
func files(t *testing.T, contents map[string]string) {
	t.Helper()
	for path, text := range contents {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// mkdirs makes each directory, with those above it.
func mkdirs(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// refused starts cmd as spec asks, expecting Start to fail, and returns
// its error; a command that started anyway is waited for and its sandbox
// finished (a sandbox left unfinished hangs TestMain's Drain), and t
// fails.
func refused(t *testing.T, cmd *exec.Cmd, spec Spec) error {
	t.Helper()
	sb, err := Start(cmd, spec)
	if err == nil {
		_ = cmd.Wait()
		if _, err := sb.Finish(); err != nil {
			t.Errorf("Finish: %v", err)
		}
		t.Errorf("Start of %v succeeded, want it refused", cmd.Args)
		return errors.New("started")
	}
	if cmd.Process != nil {
		t.Errorf("Start failed (%v) but the command started", err)
	}
	return err
}

// tryChanges tries every kind of change beneath the directory $1, which
// holds a file "f", and prints one line per attempt.
const tryChanges = tryEach + `
echo "shows: $(cat "$1/f")"
try "write" sh -c 'echo changed > "$0/f"' "$1"
try "create" sh -c 'echo x > "$0/new"' "$1"
try "mkdir" mkdir "$1/dir"
try "rm" rm "$1/f"
try "rename" mv "$1/f" "$1/g"
try "chmod" chmod 600 "$1/f"
try "touch" touch "$1/f"
try "rename the target" mv "$1" "$1.moved"
try "remove the target" rmdir "$1"
try "unmount" umount "$1"
`

// TestBindReadOnly checks that a read-only bind shows its source and
// cannot be changed in any way, inside the workspace root (which the
// command writes) and outside it, and that the report says so.
func TestBindReadOnly(t *testing.T) {
	caps := probed(t, "landlock4", "mountns")
	d := newDirs(t)
	src := filepath.Join(d.outside, "src")
	files(t, map[string]string{filepath.Join(src, "f"): "from the source"})
	for _, target := range []string{filepath.Join(d.root, "data"), filepath.Join(d.outside, "mnt")} {
		t.Run(filepath.Base(target), func(t *testing.T) {
			mkdirs(t, target)
			p := d.policy()
			p.Binds = []Bind{{Source: src, Target: target}}
			r := shell(t, Spec{Policy: p, Caps: &caps, Require: true}, tryChanges, target)
			want := []string{
				"shows: from the source",
				"write refused", "create refused", "mkdir refused", "rm refused", "rename refused",
				"chmod refused", "touch refused", "rename the target refused", "remove the target refused",
				"unmount refused",
			}
			if diff := cmp.Diff(want, lines(r.out)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{target + ":ro"}, r.report.Binds); diff != "" {
				t.Errorf("report's binds: mismatch (-want +got):\n%s", diff)
			}
			if got := sbConfig(t, filepath.Join(src, "f")); got != "from the source" {
				t.Errorf("the source's f holds %q", got)
			}
			if ents, _ := os.ReadDir(target); len(ents) != 0 {
				t.Errorf("the target on the machine holds %v", ents)
			}
		})
	}
}

// TestBindWritable checks that a writable bind is written, in the root
// and outside it (in a directory the command cannot write), that the
// writes land in the source, and that what surrounds the target outside
// the root stays read-only.
func TestBindWritable(t *testing.T) {
	caps := probed(t, "landlock4", "mountns")
	d := newDirs(t)
	for _, target := range []string{filepath.Join(d.root, "data"), filepath.Join(d.outside, "mnt")} {
		t.Run(filepath.Base(target), func(t *testing.T) {
			src := filepath.Join(d.outside, "src-"+filepath.Base(target))
			files(t, map[string]string{filepath.Join(src, "f"): "from the source"})
			mkdirs(t, target)
			p := d.policy()
			p.Binds = []Bind{{Source: src, Target: target, Writable: true}}
			r := shell(t, Spec{Policy: p, Caps: &caps, Require: true}, tryEach+`
echo "shows: $(cat "$1/f")"
try "write" sh -c 'echo changed > "$0/f"' "$1"
try "create" sh -c 'echo new > "$0/new"' "$1"
try "mkdir" mkdir "$1/dir"
try "rename" mv "$1/new" "$1/dir/moved"
try "chmod" chmod 600 "$1/f"
try "write beside the target" sh -c 'echo x > "$0/../beside"' "$1"
try "rename the target" mv "$1" "$1.moved"
`, target)
			beside := "write beside the target refused"
			if strings.HasPrefix(target, d.root) {
				beside = "write beside the target ok"
			}
			want := []string{
				"shows: from the source",
				"write ok", "create ok", "mkdir ok", "rename ok", "chmod ok", beside,
				"rename the target refused",
			}
			if diff := cmp.Diff(want, lines(r.out)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{target + ":rw"}, r.report.Binds); diff != "" {
				t.Errorf("report's binds: mismatch (-want +got):\n%s", diff)
			}
			if got := sbConfig(t, filepath.Join(src, "f")); got != "changed\n" {
				t.Errorf("the source's f holds %q, want what the command wrote", got)
			}
			if got := sbConfig(t, filepath.Join(src, "dir", "moved")); got != "new\n" {
				t.Errorf("the source's dir/moved holds %q, want what the command wrote", got)
			}
			if st, err := os.Stat(filepath.Join(src, "f")); err != nil || st.Mode().Perm() != 0o600 {
				t.Errorf("the source's f: %v, %v; want mode 0600", st, err)
			}
			if ents, _ := os.ReadDir(target); len(ents) != 0 {
				t.Errorf("the target on the machine holds %v", ents)
			}
		})
	}
}

// TestBindFile checks binds of a file on a file: read-only, then
// writable.
func TestBindFile(t *testing.T) {
	caps := probed(t, "landlock4", "mountns")
	d := newDirs(t)
	src, target := filepath.Join(d.outside, "src.txt"), filepath.Join(d.root, "shown.txt")
	files(t, map[string]string{src: "from the source\n", target: ""})
	script := tryEach + `
echo "shows: $(cat "$1")"
try "append" sh -c 'echo more >> "$0"' "$1"
try "chmod" chmod 600 "$1"
try "rm" rm -f "$1"
try "rename" mv "$1" "$1.moved"
`
	for _, tc := range []struct {
		writable bool
		want     []string
		after    string
	}{
		{false, []string{"shows: from the source", "append refused", "chmod refused", "rm refused", "rename refused"}, "from the source\n"},
		{true, []string{"shows: from the source", "append ok", "chmod ok", "rm refused", "rename refused"}, "from the source\nmore\n"},
	} {
		p := d.policy()
		p.Binds = []Bind{{Source: src, Target: target, Writable: tc.writable}}
		r := shell(t, Spec{Policy: p, Caps: &caps, Require: true}, script, target)
		if diff := cmp.Diff(tc.want, lines(r.out)); diff != "" {
			t.Errorf("writable %v: mismatch (-want +got):\n%s", tc.writable, diff)
		}
		if got := sbConfig(t, src); got != tc.after {
			t.Errorf("writable %v: the source holds %q, want %q", tc.writable, got, tc.after)
		}
	}
}

// TestBindModes checks binds in full mode (a read-only one stays
// read-only, and cannot be unmounted) and in read-only mode (where a
// writable bind is read-only, and the report says so).
func TestBindModes(t *testing.T) {
	caps := probed(t, "landlock4", "mountns")
	d := newDirs(t)
	ro, rw := filepath.Join(d.outside, "ro"), filepath.Join(d.outside, "rw")
	roSrc, rwSrc := filepath.Join(d.outside, "ro-src"), filepath.Join(d.outside, "rw-src")
	mkdirs(t, ro, rw, roSrc, rwSrc)
	binds := []Bind{{Source: roSrc, Target: ro}, {Source: rwSrc, Target: rw, Writable: true}}
	script := tryEach + `
try "write ro" sh -c 'echo x > "$0/f"' "$1"
try "unmount ro" umount "$1"
try "write ro" sh -c 'echo x > "$0/f"' "$1"
try "write rw" sh -c 'echo x > "$0/f"' "$2"
`
	for _, tc := range []struct {
		mode  Filesystem
		want  []string
		binds []string
	}{
		{Full, []string{"write ro refused", "unmount ro refused", "write ro refused", "write rw ok"}, []string{ro + ":ro", rw + ":rw"}},
		{ReadOnly, []string{"write ro refused", "unmount ro refused", "write ro refused", "write rw refused"}, []string{ro + ":ro", rw + ":ro"}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			p := Policy{Filesystem: tc.mode, Network: true, Root: d.root, TempDir: d.tmp, Binds: binds}
			r := shell(t, Spec{Policy: p, Caps: &caps, Require: true}, script, ro, rw)
			if diff := cmp.Diff(tc.want, lines(r.out)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.binds, r.report.Binds); diff != "" {
				t.Errorf("report's binds: mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBindInHostTmp checks binds whose targets lie in the host's /tmp,
// and a source there, with the command's private /tmp: each is carried
// into the new /tmp at its own path, read-only or writable, and a file's
// too.
func TestBindInHostTmp(t *testing.T) {
	caps := probed(t, "landlock4", "mountns")
	d := newDirs(t)
	base := inHostTmp(t)
	ro, rw, file := filepath.Join(base, "ro"), filepath.Join(base, "deep", "rw"), filepath.Join(base, "file.txt")
	tmpSrc := filepath.Join(base, "src-in-tmp")
	rwSrc, fileSrc := filepath.Join(d.outside, "rw-src"), filepath.Join(d.outside, "file-src.txt")
	files(t, map[string]string{
		filepath.Join(tmpSrc, "f"): "in tmp", filepath.Join(rwSrc, "f"): "outside tmp",
		fileSrc: "a file", file: "",
	})
	mkdirs(t, ro, rw)
	p := d.policy()
	p.Binds = []Bind{{Source: tmpSrc, Target: ro}, {Source: rwSrc, Target: rw, Writable: true}, {Source: fileSrc, Target: file}}
	r := shell(t, Spec{Policy: p, Caps: &caps, Require: true}, tryEach+`
echo "ro: $(cat "$1/f")"
echo "rw: $(cat "$2/f")"
echo "file: $(cat "$3")"
try "write ro" sh -c 'echo x > "$0/f"' "$1"
try "write rw" sh -c 'echo written > "$0/new"' "$2"
try "write the file" sh -c 'echo x > "$0"' "$3"
try "see the host's /tmp" ls "$4/src-in-tmp"
`, ro, rw, file, base)
	want := []string{
		"ro: in tmp", "rw: outside tmp", "file: a file",
		"write ro refused", "write rw ok", "write the file refused", "see the host's /tmp refused",
	}
	if diff := cmp.Diff(want, lines(r.out)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	for _, gap := range r.report.NotEnforced {
		if strings.Contains(gap, "/tmp") {
			t.Errorf("the report says %q, where the private /tmp was made", gap)
		}
	}
	if got := sbConfig(t, filepath.Join(rwSrc, "new")); got != "written\n" {
		t.Errorf("the writable source's new holds %q", got)
	}
}

// TestBindRefusesSwappedPaths checks that a target or a source swapped
// for a symlink to another directory after the policy was opened fails
// the start rather than redirect the bind, and starts nothing.
func TestBindRefusesSwappedPaths(t *testing.T) {
	caps := probed(t, "landlock4", "mountns")
	for _, swap := range []string{"target", "source"} {
		t.Run(swap, func(t *testing.T) {
			d := newDirs(t)
			src, target, elsewhere := filepath.Join(d.outside, "src"), filepath.Join(d.root, "data"), filepath.Join(d.outside, "elsewhere")
			files(t, map[string]string{filepath.Join(src, "f"): "source", filepath.Join(elsewhere, "f"): "elsewhere"})
			mkdirs(t, target)
			swapped := target
			if swap == "source" {
				swapped = src
			}
			policyOpened = func(Policy) {
				if err := os.Rename(swapped, swapped+".old"); err != nil {
					t.Error(err)
				}
				if err := os.Symlink(elsewhere, swapped); err != nil {
					t.Error(err)
				}
			}
			defer func() { policyOpened = nil }()
			p := d.policy()
			p.Binds = []Bind{{Source: src, Target: target, Writable: true}}
			err := refused(t, exec.Command("sh", "-c", `cat "$0/f"`, target), Spec{Policy: p, Caps: &caps, Require: true})
			if !strings.Contains(err.Error(), "symbolic link") && !strings.Contains(err.Error(), "ELOOP") && !strings.Contains(err.Error(), "changed") {
				t.Errorf("Start: %v, want the symlink or the change named", err)

			}
		})
	}
}

// TestBindPolicyErrors checks the binds Start refuses as a policy error
// (not ErrUnavailable): a source in a denied path, a writable target in a
// protected path, a target holding the root, targets that overlap, a
// source and a target of different kinds, a missing target.
func TestBindPolicyErrors(t *testing.T) {
	caps := probed(t, "landlock4", "mountns")
	d := newDirs(t)
	ssh, _, _ := secrets(t, d)
	hooks := filepath.Join(d.root, ".git", "hooks")
	file := filepath.Join(d.outside, "existing")
	mkdirs(t, hooks, filepath.Join(d.root, "data", "sub"), filepath.Join(d.outside, "src"))
	src := filepath.Join(d.outside, "src")
	for _, tc := range []struct {
		name  string
		edit  func(*Policy)
		error string
	}{
		{"source in a denied path", func(p *Policy) {
			p.DenyRead = []string{ssh}
			p.Binds = []Bind{{Source: ssh, Target: filepath.Join(d.root, "data")}}
		}, "the source lies in the denied path " + ssh},
		{"writable target in a protected path", func(p *Policy) {
			p.Protect = []string{hooks}
			p.Binds = []Bind{{Source: src, Target: hooks, Writable: true}}
		}, "a writable target in " + hooks + ", which is never written"},
		{"writable source in a protected path", func(p *Policy) {
			p.Protect = []string{hooks}
			p.Binds = []Bind{{Source: hooks, Target: filepath.Join(d.root, "data"), Writable: true}}
		}, "a writable source in " + hooks + ", which is never written"},
		{"target holding the root", func(p *Policy) {
			p.Binds = []Bind{{Source: src, Target: filepath.Dir(d.root)}}
		}, "the target holds " + d.root + ", which the command uses"},
		{"overlapping targets", func(p *Policy) {
			p.Binds = []Bind{{Source: src, Target: filepath.Join(d.root, "data")}, {Source: src, Target: filepath.Join(d.root, "data", "sub")}}
		}, "overlaps the target"},
		{"a file on a directory", func(p *Policy) {
			p.Binds = []Bind{{Source: file, Target: filepath.Join(d.root, "data")}}
		}, "one is a directory, the other a file"},
		{"a missing target", func(p *Policy) {
			p.Binds = []Bind{{Source: src, Target: filepath.Join(d.root, "absent")}}
		}, "no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := d.policy()
			tc.edit(&p)
			err := refused(t, exec.Command("true"), Spec{Policy: p, Caps: &caps})
			if errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tc.error) {
				t.Errorf("Start: %v, want a policy error saying %q", err, tc.error)
			}
		})
	}
}

// TestBindsNeedAMountNamespace checks that where no mount namespace can be
// made a command with binds is refused, ErrUnavailable naming them, even
// without Require, and that Plan says the same.
func TestBindsNeedAMountNamespace(t *testing.T) {
	caps := probed(t, "landlock4")
	caps.MountNS, caps.PIDNS, caps.Masks = false, false, false
	caps.Reasons = map[string]string{"mountns": "no mount namespace: faked"}
	d := newDirs(t)
	src, target := filepath.Join(d.outside, "src"), filepath.Join(d.root, "data")
	mkdirs(t, src, target)
	p := d.policy()
	p.Binds = []Bind{{Source: src, Target: target}}
	want := []string{"the binds on " + target + ": no mount namespace: faked"}
	for _, require := range []bool{false, true} {
		err := refused(t, exec.Command("true"), Spec{Policy: p, Caps: &caps, Require: require})
		var ue *UnavailableError
		if !errors.Is(err, ErrUnavailable) || !errors.As(err, &ue) {
			t.Fatalf("Require %v: Start: %v, want ErrUnavailable", require, err)
		}
		if diff := cmp.Diff(want, ue.Missing); diff != "" {
			t.Errorf("Require %v: mismatch (-want +got):\n%s", require, diff)
		}
	}
	rep, err := Plan(p, Limits{}, caps)
	var ue *UnavailableError
	if !errors.As(err, &ue) || !slices.Contains(ue.Missing, want[0]) || len(rep.Binds) != 0 || !slices.Contains(rep.NotEnforced, want[0]) {
		t.Errorf("Plan: %+v, %v; want the binds missing, and none claimed", rep, err)
	}
}

// stateDir makes a directory like toolhost's state directory: a secret
// file, the caches of two roots (abc holds an object), and a mount point
// for a bind.
func stateDir(t *testing.T, d dirs) (state, secret, cache, mnt string) {
	t.Helper()
	state = filepath.Join(d.outside, "state")
	secret, cache, mnt = filepath.Join(state, "secrets.json"), filepath.Join(state, "caches", "abc"), filepath.Join(state, "mounts", "m1")
	files(t, map[string]string{
		secret: "TOKEN", filepath.Join(cache, "obj"): "cached",
		filepath.Join(state, "caches", "other", "obj"): "another root's",
	})
	mkdirs(t, mnt)
	if err := os.Chmod(state, 0o700); err != nil {
		t.Fatal(err)
	}
	return state, secret, cache, mnt
}

// TestDeniedDirHoldingACache checks that a denied directory holding the
// command's cache directory and a bind target is masked all the same: the
// command lists in it only the path down to them, cannot read a sibling,
// writes its cache (the writes land there), and sees the bind's source.
func TestDeniedDirHoldingACache(t *testing.T) {
	caps := probed(t, "landlock4", "mountns", "masks")
	d := newDirs(t)
	state, secret, cache, mnt := stateDir(t, d)
	src := filepath.Join(d.outside, "bucket")
	files(t, map[string]string{filepath.Join(src, "object"): "from the bucket"})
	p := d.policy()
	p.CacheDir = cache
	p.DenyRead = []string{state}
	p.Binds = []Bind{{Source: src, Target: mnt}}
	r := shell(t, Spec{Policy: p, Caps: &caps, Require: true}, tryEach+`
echo "state: $(ls -A "$1" | tr '\n' ' ')"
echo "caches: $(ls -A "$1/caches" | tr '\n' ' ')"
echo "mounts: $(ls -A "$1/mounts" | tr '\n' ' ')"
stat -c '%a' "$1"
echo "secret: $(cat "$2" 2>/dev/null)"
try "read the secret" cat "$2"
try "read another root's cache" cat "$1/caches/other/obj"
echo "cache: $(cat "$3/obj")"
try "write the cache" sh -c 'echo new > "$0/obj2"' "$3"
try "write the state directory" sh -c 'echo x > "$0/x"' "$1"
try "write the caches directory" sh -c 'echo x > "$0/caches/x"' "$1"
echo "bind: $(cat "$4/object")"
try "write the bind" sh -c 'echo x > "$0/x"' "$4"
try "unmount the mask" umount "$1"
`, state, secret, cache, mnt)
	want := []string{
		"state: caches mounts ", "caches: abc ", "mounts: m1 ", "700", "secret: ",
		"read the secret refused", "read another root's cache refused",
		"cache: cached", "write the cache ok", "write the state directory refused", "write the caches directory refused",
		"bind: from the bucket", "write the bind refused", "unmount the mask refused",
	}
	if diff := cmp.Diff(want, lines(r.out)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{state}, r.report.DenyRead); diff != "" {
		t.Errorf("report's denyRead: mismatch (-want +got):\n%s", diff)
	}
	if got := sbConfig(t, filepath.Join(cache, "obj2")); got != "new\n" {
		t.Errorf("the cache's obj2 holds %q, want what the command wrote", got)
	}
	if got := sbConfig(t, secret); got != "TOKEN" {
		t.Errorf("the secret holds %q", got)
	}
}

// TestBindKeepsProtectedPaths checks that a writable bind never makes a
// protected path writable: one its source holds stays read-only in the
// bind, and one its target holds is shown again, read-only, on top of it;
// the directories above either cannot be moved aside.
func TestBindKeepsProtectedPaths(t *testing.T) {
	caps := probed(t, "landlock4", "mountns")
	d := newDirs(t)
	repo := filepath.Join(d.outside, "repo") // a source holding .git/hooks
	sub := filepath.Join(d.root, "sub")      // a target holding .git/hooks
	bucket := filepath.Join(d.outside, "bucket")
	files(t, map[string]string{
		filepath.Join(repo, ".git", "hooks", "pre-commit"):   "repo hook",
		filepath.Join(sub, ".git", "hooks", "pre-commit"):    "host hook",
		filepath.Join(bucket, ".git", "hooks", "pre-commit"): "bucket hook",
	})
	repoHooks, subHooks := filepath.Join(repo, ".git", "hooks"), filepath.Join(sub, ".git", "hooks")
	target := filepath.Join(d.root, "repo")
	mkdirs(t, target)
	p := d.policy()
	p.Protect = []string{repoHooks, subHooks}
	p.Binds = []Bind{{Source: repo, Target: target, Writable: true}, {Source: bucket, Target: sub, Writable: true}}
	r := shell(t, Spec{Policy: p, Caps: &caps, Require: true}, tryEach+`
try "write in the bind" sh -c 'echo x > "$0/f"' "$1"
try "write its source's hook" sh -c 'echo evil > "$0/.git/hooks/pre-commit"' "$1"
try "add a hook" sh -c 'echo evil > "$0/.git/hooks/post-commit"' "$1"
try "move its .git aside" mv "$1/.git" "$1/.git-old"
try "remove its hooks" rm -rf "$1/.git/hooks"
try "write the rest of its .git" sh -c 'echo x > "$0/.git/HEAD"' "$1"
echo "hook under the target: $(cat "$2/.git/hooks/pre-commit")"
try "write it" sh -c 'echo evil > "$0/.git/hooks/pre-commit"' "$2"
try "move that .git aside" mv "$2/.git" "$2/.git-old"
try "write the rest of that .git" sh -c 'echo x > "$0/.git/HEAD"' "$2"
try "write in the second bind" sh -c 'echo x > "$0/f"' "$2"
`, target, sub)
	want := []string{
		"write in the bind ok", "write its source's hook refused", "add a hook refused", "move its .git aside refused",
		"remove its hooks refused", "write the rest of its .git ok",
		"hook under the target: host hook", "write it refused", "move that .git aside refused",
		"write the rest of that .git ok", "write in the second bind ok",
	}
	if diff := cmp.Diff(want, lines(r.out)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	for path, text := range map[string]string{
		filepath.Join(repoHooks, "pre-commit"): "repo hook", filepath.Join(subHooks, "pre-commit"): "host hook",
		filepath.Join(bucket, ".git", "hooks", "pre-commit"): "bucket hook", filepath.Join(repo, "f"): "x\n",
		filepath.Join(bucket, "f"): "x\n",
	} {
		if got := sbConfig(t, path); got != text {
			t.Errorf("%s holds %q, want %q", path, got, text)
		}
	}

	// A source without the protected path to show it on: refused.
	if err := os.RemoveAll(filepath.Join(bucket, ".git")); err != nil {
		t.Fatal(err)
	}
	err := refused(t, exec.Command("true"), Spec{Policy: p, Caps: &caps, Require: true})
	if !strings.Contains(err.Error(), subHooks+" in the writable bind on "+sub) {
		t.Errorf("Start: %v, want the protected path it cannot keep named", err)
	}
}

// TestDeniedDirHoldingTheRoot checks a denied directory that holds the
// workspace root, the command's other directories and a read root, and a
// denied directory inside it holding the cache: the command works in
// each, lists in the denied directories only the path down to them, and
// reads nothing else there.
func TestDeniedDirHoldingTheRoot(t *testing.T) {
	caps := probed(t, "landlock4", "mountns", "masks")
	d := newDirs(t)
	base := filepath.Dir(d.root)
	state, secret, cache, mnt := stateDir(t, d)
	ref := filepath.Join(d.outside, "ref")
	src := t.TempDir()
	files(t, map[string]string{
		filepath.Join(ref, "doc"): "reference", filepath.Join(src, "object"): "from the bucket",
		filepath.Join(d.root, "main.go"): "package main",
	})
	p := d.policy()
	p.CacheDir, p.ReadRoots = cache, []string{ref}
	p.DenyRead = []string{base, state}
	p.Binds = []Bind{{Source: src, Target: mnt, Writable: true}}
	r := shell(t, Spec{Policy: p, Caps: &caps, Require: true}, tryEach+`
echo "base: $(ls -A "$1" | tr '\n' ' ')"
echo "outside: $(ls -A "$1/outside" | tr '\n' ' ')"
echo "state: $(ls -A "$2" | tr '\n' ' ')"
echo "root: $(cat "$1/root/main.go")"
try "write the root" sh -c 'echo x > "$0/root/new"' "$1"
try "write the cache" sh -c 'echo x > "$0/new"' "$3"
try "write the bind" sh -c 'echo x > "$0/new"' "$4"
echo "read root: $(cat "$1/outside/ref/doc")"
try "write the read root" sh -c 'echo x > "$0/outside/ref/new"' "$1"
try "read the secret" cat "$5"
try "read a file beside the root" cat "$1/outside/existing"
try "write beside the root" sh -c 'echo x > "$0/new"' "$1"
`, base, state, cache, mnt, secret)
	want := []string{
		"base: extra outside root tmp ", "outside: ref state ", "state: caches mounts ",
		"root: package main", "write the root ok", "write the cache ok", "write the bind ok",
		"read root: reference", "write the read root refused",
		"read the secret refused", "read a file beside the root refused", "write beside the root refused",
	}
	if diff := cmp.Diff(want, lines(r.out)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	for _, f := range []string{filepath.Join(d.root, "new"), filepath.Join(cache, "new"), filepath.Join(src, "new")} {
		if got := sbConfig(t, f); got != "x\n" {
			t.Errorf("%s holds %q, want what the command wrote", f, got)
		}
	}
}

// TestDeniedDirHoldingAnOwnedSource checks that an owned bind's source
// may lie in a denied directory (a mount's cache in the state directory):
// the command sees it at the target, and of the denied directory only the
// path down to it; the secret beside it stays unreadable.
func TestDeniedDirHoldingAnOwnedSource(t *testing.T) {
	caps := probed(t, "landlock4", "mountns", "masks")
	d := newDirs(t)
	state, secret, cache, _ := stateDir(t, d)
	view := filepath.Join(state, "mounts", "s1", "views", "1")
	files(t, map[string]string{filepath.Join(view, "object"): "from the bucket", filepath.Join(state, "mounts", "s1", "record.json"): "RECORD"})
	mnt := filepath.Join(d.root, "data")
	mkdirs(t, mnt)
	p := d.policy()
	p.CacheDir = cache
	p.DenyRead = []string{state}
	p.Binds = []Bind{{Source: view, Target: mnt, Owned: true}}
	r := shell(t, Spec{Policy: p, Caps: &caps, Require: true}, tryEach+`
echo "bind: $(cat "$3/object")"
echo "mount: $(ls -A "$1/mounts/s1" | tr '\n' ' ')"
try "read the record" cat "$1/mounts/s1/record.json"
try "read the secret" cat "$2"
try "write the bind" sh -c 'echo x > "$0/x"' "$3"
`, state, secret, mnt)
	want := []string{"bind: from the bucket", "mount: views ", "read the record refused", "read the secret refused", "write the bind refused"}
	if diff := cmp.Diff(want, lines(r.out)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	p.Binds[0].Owned = false
	if err := refused(t, exec.Command("true"), Spec{Policy: p, Caps: &caps, Require: true}); err == nil || !strings.Contains(err.Error(), "denied path") {
		t.Errorf("a bind of a source in a denied path, not owned: %v, want it refused", err)
	}
}
