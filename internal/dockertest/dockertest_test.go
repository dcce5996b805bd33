package dockertest

import (
	"bufio"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestContainer starts a dockerd (or uses the system's), builds the image
// with a static toolhost and runs a container, then checks what the
// container is: its own hostname, the image's files, busybox's applets, no
// network but loopback, and the static toolhost answering.
func TestContainer(t *testing.T) {
	t.Parallel()
	d := Start(t)
	c := d.Run(t, d.Image(t, BuildToolhost(t, "github.com/toolhost/toolhost")))

	if got := c.Exec(t, "cat", "/etc/hostname", MarkerFile); got != c.Name+"\n"+MarkerContent {
		t.Errorf("cat /etc/hostname %s: %q, want the container's name and the marker", MarkerFile, got)
	}
	// busybox's applets are on PATH, /bin/sh among them, and the
	// workspace is there and empty.
	if got := c.Exec(t, "sh", "-c", "for a in sh ps sleep; do readlink /bin/$a; done; ls -A /ws; id -un"); got != "/bin/busybox\n/bin/busybox\n/bin/busybox\nroot\n" {
		t.Errorf("sh, ps and sleep, /ws and the user: %q", got)
	}
	// --network none: loopback is the only interface.
	var ifaces []string
	for _, line := range strings.Split(c.Exec(t, "cat", "/proc/net/dev"), "\n")[2:] {
		if name, _, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			ifaces = append(ifaces, name)
		}
	}
	if diff := cmp.Diff([]string{"lo"}, ifaces); diff != "" {
		t.Errorf("the container's network interfaces (-want +got):\n%s", diff)
	}
	if got := c.Exec(t, "sh", "-c", ToolhostPath+" --help 2>&1; true"); !strings.Contains(got, "toolhost [flags]") {
		t.Errorf("toolhost --help in the container: %q", got)
	}
	// Procs sees the container's first process, as pid 1 there.
	if i := slices.IndexFunc(c.Procs(t), func(p Proc) bool { return p.PID == c.PID }); i < 0 {
		t.Errorf("Procs lists no pid %d, the container's first process: %+v", c.PID, c.Procs(t))
	} else if p := c.Procs(t)[i]; p.NSPID != 1 || p.Comm != "sh" {
		t.Errorf("the container's first process: %+v, want sh as pid 1 in the container", p)
	}
	// pid 1 reaps the orphans it adopts: a sleep whose shell has exited,
	// once killed, leaves no zombie.
	orphan := strings.TrimSpace(c.Exec(t, "sh", "-c", "sleep 1000 >/dev/null 2>&1 & echo $!"))
	i := slices.IndexFunc(c.Procs(t), func(p Proc) bool { return strconv.Itoa(p.NSPID) == orphan })
	if i < 0 {
		t.Fatalf("no process %s (the orphan sleep) in the container: %+v", orphan, c.Procs(t))
	}
	host := c.Procs(t)[i].PID
	if ppid, _, _, err := procStat(host); err != nil || ppid != c.PID {
		t.Errorf("the orphan sleep's parent: %d (%v), want the container's pid 1, %d", ppid, err, c.PID)
	}
	c.Exec(t, "kill", "-KILL", orphan)
	if !awaitReaped(host, stopLimit) {
		t.Errorf("the orphan sleep (pid %d here) was not reaped within %v", host, stopLimit)
	}
	if want := []string{d.Client, "-H", d.Host, "exec", "-i", c.Name, ToolhostPath, "--root", Workspace, "--log-level", "debug"}; !slices.Equal(c.ToolhostArgv("--log-level", "debug"), want) {
		t.Errorf("ToolhostArgv: %q, want %q", c.ToolhostArgv("--log-level", "debug"), want)
	}
}

// TestKillTransportClosesStdin runs `docker exec -i` of cat in the
// container, as a child of the test, and kills it with
// KillTransport: the client is the one TransportPIDs finds, and cat, in
// the container, sees its stdin end and exits. That is how a far toolhost
// learns its link is gone.
func TestKillTransportClosesStdin(t *testing.T) {
	t.Parallel()
	d := Start(t)
	c := d.Run(t, d.Image(t, BuildToolhost(t, "github.com/toolhost/toolhost")))

	argv := c.ExecArgv("cat")
	cmd := exec.Command(argv[0], argv[1:]...)
	stdin, err := cmd.StdinPipe() // held open: only the kill ends cat's input
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	// cat echoing a line says it runs.
	if _, err := stdin.Write([]byte("ready\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		_ = cmd.Process.Kill()
		t.Fatalf("cat in the container echoed %q, %v; want ready", line, err)
	}
	go func() { waited <- cmd.Wait() }()
	var cat []Proc
	for _, p := range c.Procs(t) {
		if p.Comm == "cat" {
			cat = append(cat, p)
		}
	}
	if len(cat) != 1 {
		t.Fatalf("want one cat in the container, found %+v", cat)
	}
	if got := c.TransportPIDs(os.Getpid()); !slices.Equal(got, []int{cmd.Process.Pid}) {
		t.Errorf("TransportPIDs(the test): %v, want the client %d", got, cmd.Process.Pid)
	}
	t0 := time.Now()
	if pid := c.KillTransport(t, os.Getpid()); pid != cmd.Process.Pid {
		t.Errorf("KillTransport killed %d, want the client %d", pid, cmd.Process.Pid)
	}
	<-waited
	if !awaitGone(cat[0].PID, stopLimit) {
		t.Fatalf("cat (pid %d) still runs in the container %v after its docker exec client was killed", cat[0].PID, stopLimit)
	}
	t.Logf("cat in the container ended %v after its client was killed", time.Since(t0).Round(time.Millisecond))
	if got := c.TransportPIDs(0); len(got) != 0 {
		t.Errorf("TransportPIDs after the kill: %v, want none", got)
	}
}

// TestStop stops a dockerd of the fixture's own while a container runs:
// once Stop returns, dockerd, its containerd and the container's processes
// are gone, and so is its directory.
func TestStop(t *testing.T) {
	t.Parallel()
	d := Start(t)
	if !d.Own {
		t.Skip("skipped: a system dockerd is running, and the fixture never stops that one")
	}
	// Any static binary will do for toolhost here.
	bb, err := findBusybox()
	if err != nil {
		Unavailable(t, "%v", err)
	}
	c := d.Run(t, d.Image(t, bb))
	daemon, children := d.d.Cmd.Process.Pid, childPIDs(d.d.Cmd.Process.Pid)
	if len(children) == 0 {
		t.Fatalf("dockerd (pid %d) has no child: where is its containerd?", daemon)
	}
	d.Stop()
	for _, pid := range append([]int{daemon, c.PID}, children...) {
		if alive(pid) {
			t.Errorf("pid %d still runs after Stop", pid)
		}
	}
	if _, err := os.Stat(d.dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there after Stop: %v", d.dir, err)
	}
	d.Stop() // again: nothing to do
}
