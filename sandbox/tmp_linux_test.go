//go:build linux

package sandbox

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// inHostTmp makes a directory in the host's /tmp itself (TestMain points
// TMPDIR elsewhere), removed when t ends.
func inHostTmp(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(hostTmp, "sbtmp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestPrivateTmp checks that a confined command's /tmp is its temporary
// directory, writable in workspace-write and read-only modes, that the
// host's /tmp is out of its sight but for the policy's directories in it,
// which keep their paths and their confinement, and that TMPDIR names
// /tmp.
func TestPrivateTmp(t *testing.T) {
	caps := probed(t, "landlock4", "mountns")
	base := inHostTmp(t)
	secret := filepath.Join(base, "secret")
	d := dirs{root: filepath.Join(base, "ws"), tmp: filepath.Join(base, "t"), cache: filepath.Join(base, "cache"), extra: filepath.Join(base, "extra")}
	ro := filepath.Join(base, "ro")
	for _, p := range []string{d.root, d.tmp, d.cache, d.extra, ro} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{secret, filepath.Join(ro, "f")} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const script = `
try() { name=$1; shift; if ("$@") >/dev/null 2>&1; then echo "$name ok"; else echo "$name refused"; fi; }
echo "TMPDIR=$TMPDIR"
try "write /tmp/x" sh -c 'echo mine > /tmp/x'
try "read the host's /tmp" cat "$1"
try "write the root" sh -c 'echo x > "$0/f"' "$2"
try "read a read root" cat "$3/f"
try "write a read root" sh -c 'echo x > "$0/g"' "$3"
try "chmod a read root" chmod 700 "$3"
`
	for _, tc := range []struct {
		mode Filesystem
		want []string
	}{
		{WorkspaceWrite, []string{"TMPDIR=/tmp", "write /tmp/x ok", "read the host's /tmp refused", "write the root ok", "read a read root ok", "write a read root refused", "chmod a read root refused"}},
		{ReadOnly, []string{"TMPDIR=/tmp", "write /tmp/x ok", "read the host's /tmp refused", "write the root refused", "read a read root ok", "write a read root refused", "chmod a read root refused"}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			p := d.policy()
			p.Filesystem, p.ReadRoots = tc.mode, []string{ro}
			cmd := exec.Command("sh", "-c", script, "sh", secret, d.root, ro)
			cmd.Env = append(os.Environ(), "TMPDIR="+d.tmp)
			r := run(t, Spec{Policy: p, Caps: &caps, Require: true}, cmd)
			if diff := cmp.Diff(tc.want, lines(r.out)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			for _, gap := range r.report.NotEnforced {
				if strings.Contains(gap, "/tmp") {
					t.Errorf("the report says %q, where the private /tmp was made", gap)
				}
			}
			if got, err := os.ReadFile(filepath.Join(d.tmp, "x")); err != nil || string(got) != "mine\n" {
				t.Errorf("the temporary directory's x: %q, %v; want what the command wrote to /tmp/x", got, err)
			}
			os.Remove(filepath.Join(d.tmp, "x"))
		})
	}
}

// TestPrivateTmpConcurrent checks that two commands running at once, each
// writing /tmp/x, see their own only.
func TestPrivateTmpConcurrent(t *testing.T) {
	caps := probed(t, "landlock4", "mountns")
	type running struct {
		cmd *exec.Cmd
		sb  *Sandbox
		in  io.WriteCloser
		out *bufio.Reader
	}
	var cmds []running
	for _, name := range []string{"a", "b"} {
		d := newDirs(t)
		// Write, say so, wait for the other to have written, read.
		cmd := exec.Command("sh", "-c", `echo "$0" > /tmp/x && echo written && read go && cat /tmp/x`, name)
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		sb, err := Start(cmd, Spec{Policy: d.policy(), Caps: &caps, Require: true})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		cmds = append(cmds, running{cmd, sb, in, bufio.NewReader(out)})
	}
	for _, c := range cmds {
		if line, err := c.out.ReadString('\n'); line != "written\n" {
			t.Fatalf("the command said %q, %v; want written", line, err)
		}
	}
	for i, c := range cmds {
		io.WriteString(c.in, "go\n")
		c.in.Close()
		rest, _ := io.ReadAll(c.out)
		if err := c.cmd.Wait(); err != nil {
			t.Errorf("command %d: %v", i, err)
		}
		if _, err := c.sb.Finish(); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		if want := []string{"a", "b"}[i] + "\n"; string(rest) != want {
			t.Errorf("command %d read %q from /tmp/x, want %q: its own", i, rest, want)
		}
	}
}

// TestPlanTmp checks which of the policy's directories a private /tmp
// carries, and that one holding /tmp gets none.
func TestPlanTmp(t *testing.T) {
	caps := probed(t, "landlock4", "mountns")
	p := Policy{Root: "/tmp/w/root", TempDir: "/tmp/s/t1", CacheDir: "/home/u/.cache", Writable: []string{"/tmp/w/root/out", "/tmp/s/t1/sub"}, ReadRoots: []string{"/tmp/art", "/usr/share"}}
	ly, _, err := plan(p, Limits{}, caps)
	if err != nil {
		t.Fatal(err)
	}
	want := &tmpPlan{src: "/tmp/s/t1", carry: []string{"/tmp/art", "/tmp/w/root"}}
	if diff := cmp.Diff(want, ly.tmp, cmp.AllowUnexported(tmpPlan{})); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	p.Root = "/"
	ly, rep, _ := plan(p, Limits{}, caps)
	if ly.tmp != nil || !strings.Contains(strings.Join(rep.NotEnforced, "\n"), "a private /tmp (the host's /tmp stays visible, and read-only but for TMPDIR): / holds it") {
		t.Errorf("a root of / got %+v, report %q; want no private /tmp, and the report saying why", ly.tmp, rep.NotEnforced)
	}
}

// BenchmarkPrivateTmp measures what a private /tmp adds to a confined
// true whose root and a read root lie in the host's /tmp (both carried
// into the new /tmp), each iteration run without a temporary directory
// (no private /tmp) and with one, so that both see the same load.
func BenchmarkPrivateTmp(b *testing.B) {
	caps := probed(b, "landlock4", "mountns")
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	base, err := os.MkdirTemp(hostTmp, "sbtmp")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(base)
	root, tmp, ro := filepath.Join(base, "ws"), filepath.Join(base, "t"), filepath.Join(base, "ro")
	for _, p := range []string{root, tmp, ro} {
		if err := os.Mkdir(p, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	without := Policy{Network: true, Root: root, ReadRoots: []string{ro}}
	with := without
	with.TempDir = tmp
	one := func(p Policy) time.Duration {
		t0 := time.Now()
		cmd := exec.Command(truePath)
		sb, err := Start(cmd, Spec{Policy: p, Caps: &caps, Require: true})
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		if _, err := sb.Finish(); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	var w, o []time.Duration
	for b.Loop() {
		o, w = append(o, one(without)), append(w, one(with))
	}
	mo, mw := median(o), median(w)
	b.ReportMetric(float64(mo.Nanoseconds())/1e3, "without-us")
	b.ReportMetric(float64(mw.Nanoseconds())/1e3, "with-us")
	b.ReportMetric(float64((mw-mo).Nanoseconds())/1e3, "cost-us")
	Drain()
}
