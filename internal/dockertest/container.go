package dockertest

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// keepAlive is the script of a container's first process: it lives until
// killed, and reaps every child it has, its adopted orphans among them.
const keepAlive = "while :; do sleep 2147483647 & wait; done"

// Container is a running container of the fixture's image, without a
// network, kept alive by a shell that reaps orphans (keepAlive).
type Container struct {
	// Name is its name, and its hostname.
	Name string
	// PID is its first process's pid on this machine.
	PID int

	d *Daemon
}

// Run starts a container of image (one Image built) with --network none,
// named and hostnamed toolhost-dockertest-RANDOM, and returns it; the
// test's cleanup removes it and waits until its processes are gone.
func (d *Daemon) Run(t testing.TB, image string) *Container {
	t.Helper()
	t0 := time.Now()
	name := "toolhost-dockertest-" + randomHex(6)
	d.Docker(t, "run", "--detach", "--name", name, "--hostname", name,
		"--network", "none",
		// Its pid 1, a shell, ignores SIGTERM: stopping it (docker stop,
		// or a dockerd that shuts down) would wait for the timeout.
		"--stop-signal", "SIGKILL",
		"--label", "toolhost.dockertest=1",
		// pid 1 waits, and so reaps the orphans it adopts, as an init
		// does: a far toolhost that dies leaves no zombies behind.
		image, "/bin/sh", "-c", keepAlive)
	c := &Container{Name: name, d: d}
	t.Cleanup(func() { c.remove(t) })
	pid, err := strconv.Atoi(strings.TrimSpace(d.Docker(t, "inspect", "--format", "{{.State.Pid}}", name)))
	if err != nil || pid <= 0 {
		t.Fatalf("dockertest: the pid of container %s: %d %v", name, pid, err)
	}
	c.PID = pid
	t.Logf("dockertest: container %s (pid %d) up in %v", name, pid, time.Since(t0).Round(time.Millisecond))
	return c
}

// remove removes the container (docker rm --force kills what runs in it)
// and waits until its first process is gone.
func (c *Container) remove(t testing.TB) {
	if c.d.stopped() {
		// Its dockerd is gone, and took the container with it.
		if c.PID > 0 && alive(c.PID) {
			t.Errorf("dockertest: container %s's pid %d still runs after its dockerd stopped", c.Name, c.PID)
		}
		return
	}
	if out, err := c.d.run(context.Background(), commandLimit, "rm", "--force", c.Name); err != nil {
		t.Errorf("dockertest: removing container %s: %v %s", c.Name, err, out)
	}
	if c.PID > 0 && !awaitGone(c.PID, stopLimit) {
		t.Errorf("dockertest: container %s's pid %d still runs %v after docker rm --force", c.Name, c.PID, stopLimit)
	}
}

// ExecArgv is the command that runs argv in the container with its stdin
// attached: docker -H HOST exec -i NAME argv….
func (c *Container) ExecArgv(argv ...string) []string {
	return append([]string{c.d.Client, "-H", c.d.Host, "exec", "-i", c.Name}, argv...)
}

// ToolhostArgv is the command of a destination in the container: its
// toolhost on the root Workspace, with extra flags.
func (c *Container) ToolhostArgv(extra ...string) []string {
	return c.ExecArgv(append([]string{ToolhostPath, "--root", Workspace}, extra...)...)
}

// ExecCommand is ToolhostArgv as the COMMAND of --destination NAME=COMMAND:
// its words quoted as a POSIX shell would read them.
func (c *Container) ExecCommand(extra ...string) string {
	argv := c.ToolhostArgv(extra...)
	q := make([]string, len(argv))
	for i, w := range argv {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// Exec runs argv in the container (docker exec, no stdin) and returns its
// stdout; a failure fails the test.
func (c *Container) Exec(t testing.TB, argv ...string) string {
	t.Helper()
	return c.d.Docker(t, append([]string{"exec", c.Name}, argv...)...)
}

// TransportPIDs lists the running docker clients that exec in this
// container (their argv holds exec and the container's name) and are
// children of parent, or all of them when parent is 0. A hub runs each
// destination's transport as its own child, so with parent the server
// under test's pid this finds the link of its destinations in the
// container. See the package's doc for what killing one does.
func (c *Container) TransportPIDs(parent int) []int {
	var out []int
	for _, pid := range pids() {
		ppid, comm, state, err := procStat(pid)
		if err != nil || comm != "docker" || state == 'Z' || (parent != 0 && ppid != parent) {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil {
			continue
		}
		argv := strings.Split(string(bytes.TrimRight(cmdline, "\x00")), "\x00")
		if slices.Contains(argv, "exec") && slices.Contains(argv, c.Name) {
			out = append(out, pid)
		}
	}
	return out
}

// KillTransport SIGKILLs the one docker client exec'ing in this container
// that is a child of parent (see TransportPIDs) and returns its pid; none,
// or more than one, fails the test. It does not wait: the parent reaps
// the client, and the test waits on what the parent then says.
func (c *Container) KillTransport(t testing.TB, parent int) int {
	t.Helper()
	found := c.TransportPIDs(parent)
	if len(found) != 1 {
		t.Fatalf("dockertest: want one docker client exec'ing in %s as a child of pid %d, found %v", c.Name, parent, found)
	}
	if err := syscall.Kill(found[0], syscall.SIGKILL); err != nil {
		t.Fatalf("dockertest: killing the docker client %d: %v", found[0], err)
	}
	return found[0]
}

// Proc is a process running in a container, as this machine sees it.
type Proc struct {
	// PID is its pid on this machine; NSPID is its pid in the container.
	PID, NSPID int
	// Comm is its command name; Argv its arguments.
	Comm string
	Argv []string
}

// Procs lists the processes running in the container (zombies left out),
// found in this machine's /proc by their PID namespace, the one of the
// container's first process.
func (c *Container) Procs(t testing.TB) []Proc {
	t.Helper()
	ns, err := os.Readlink("/proc/" + strconv.Itoa(c.PID) + "/ns/pid")
	if err != nil {
		t.Fatalf("dockertest: the PID namespace of container %s: %v", c.Name, err)
	}
	var out []Proc
	for _, pid := range pids() {
		dir := "/proc/" + strconv.Itoa(pid)
		if other, err := os.Readlink(dir + "/ns/pid"); err != nil || other != ns {
			continue
		}
		_, comm, state, err := procStat(pid)
		if err != nil || state == 'Z' {
			continue
		}
		cmdline, _ := os.ReadFile(dir + "/cmdline")
		p := Proc{PID: pid, Comm: comm, Argv: strings.Split(string(bytes.TrimRight(cmdline, "\x00")), "\x00")}
		if status, err := os.ReadFile(dir + "/status"); err == nil {
			for _, line := range strings.Split(string(status), "\n") {
				if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
					f := strings.Fields(v)
					p.NSPID, _ = strconv.Atoi(f[len(f)-1])
				}
			}
		}
		out = append(out, p)
	}
	return out
}
