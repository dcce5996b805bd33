package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/client"
	"github.com/toolhost/toolhost/protocol"
)

// farFlags are the flags of every far toolhost of the hub figures, and of
// the servers they are compared with: unconfined, so that the figures
// measure the hub and its transport, not the sandbox.
var farFlags = []string{"--sandbox", "off", "--log-level", "warn"}

// destFlag renders a --destination value, every word quoted.
func destFlag(name string, argv []string) string {
	q := make([]string, len(argv))
	for i, w := range argv {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return name + "=" + strings.Join(q, " ")
}

// farDir makes a directory of its own in the work directory for a far
// toolhost, with a root and an artifacts directory, and returns the
// toolhost's flags after --root.
func (b *bench) farDir(name string) (root string, flags []string, err error) {
	b.nextID++
	base := filepath.Join(b.work, fmt.Sprintf("%02d-%s", b.nextID, name))
	root = filepath.Join(base, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", nil, err
	}
	return root, append([]string{"--artifacts-dir", filepath.Join(base, "artifacts")}, farFlags...), nil
}

// runTrue runs `true` on s, on the destination dest when not empty, and
// returns the round trip.
func (s *server) runTrue(dest string) (time.Duration, error) {
	ctx, cancel := limit()
	defer cancel()
	t0 := time.Now()
	r, err := s.RunCommand(ctx, &protocol.RunCommandParams{Argv: []string{"true"}, Destination: dest})
	d := time.Since(t0)
	if err == nil && !r.Success {
		err = fmt.Errorf("runCommand true on %q did not succeed: %s %s", dest, r.Status, r.Stderr)
	}
	return d, err
}

// hubVersusStraight measures runCommand of `true` through a hub whose one
// destination, "far", is reached by transport(root) (the far toolhost's
// argv up to --root and its root), against the same request to a server
// with the same flags straight, interleaved.
func (b *bench) hubVersusStraight(name string, transport []string) (hub, straight durations, err error) {
	farRoot, flags, err := b.farDir(name + "-far")
	if err != nil {
		return nil, nil, err
	}
	argv := append(append(append([]string{}, transport...), b.bin, "--root", farRoot), flags...)
	h, err := b.startServer(name, append([]string{"--destination", destFlag("far", argv)}, farFlags...)...)
	if err != nil {
		return nil, nil, err
	}
	defer h.end()
	s, err := b.startServer(name+"-straight", farFlags...)
	if err != nil {
		return nil, nil, err
	}
	defer s.end()
	warm, n := b.iters(30, 5), b.iters(800, 30)
	for i := range warm + n {
		d, err := h.runTrue("far")
		if err != nil {
			return nil, nil, err
		}
		e, err := s.runTrue("")
		if err != nil {
			return nil, nil, err
		}
		if i >= warm {
			hub, straight = append(hub, d), append(straight, e)
		}
	}
	return hub, straight, nil
}

// hubLocal measures runCommand of `true` through the hub over a direct
// local transport (the far toolhost a child of the hub, its stdio the
// transport) against the same request to the same kind of server
// straight.
func (b *bench) hubLocal() error {
	hub, straight, err := b.hubVersusStraight("hub-local", nil)
	if err != nil {
		return err
	}
	p50, s50 := hub.pct(50), straight.pct(50)
	b.add(row{Figure: "`runCommand` of `true` through the hub, local transport, p50", Value: fmtDur(p50), Baseline: "the same straight: " + fmtDur(s50),
		Ratio: ratio(float64(p50), float64(s50)), Target: "≤ +0.3 ms", Met: met(p50-s50 <= 300*time.Microsecond),
		Why: "the hub adds one more JSON-RPC hop: the hub's read loop, package client's write to the far toolhost and its read loop, the answer decoded and its ids rewritten (a generic JSON walk), then encoded again for the client; on 2 shared cores the two servers' goroutines also compete for the CPU with the command."})
	b.add(row{Figure: "`runCommand` of `true` through the hub, local transport, p99", Value: fmtDur(hub.pct(99)), Baseline: "the same straight: " + fmtDur(straight.pct(99)),
		Ratio: ratio(float64(hub.pct(99)), float64(straight.pct(99)))})
	b.note("hub, local transport: %d rounds of `runCommand` of `true` with `destination` to a server whose destination is `toolhost --root …` run as its child, each followed by the same request straight to a server started with the far side's flags (%s); both unconfined.", len(hub), strings.Join(farFlags, " "))
	return nil
}

// hubSSH measures the same over ssh to an sshd on 127.0.0.1 started for
// the figure; without sshd it says why and measures nothing.
func (b *bench) hubSSH() error {
	d, err := startBenchSSHD(filepath.Join(b.work, "sshd"))
	if errors.Is(err, errNoSSHD) {
		b.logf("hub-ssh skipped: %v", err)
		b.add(row{Figure: "`runCommand` of `true` through the hub over localhost ssh", Value: "skipped: " + err.Error()})
		return nil
	}
	if err != nil {
		return err
	}
	defer d.stop()
	hub, straight, err := b.hubVersusStraight("hub-ssh", append([]string{"ssh"}, d.args()...))
	if err != nil {
		return fmt.Errorf("%w (sshd log: %s)", err, d.log.tail())
	}
	p50, s50 := hub.pct(50), straight.pct(50)
	b.add(row{Figure: "`runCommand` of `true` through the hub over localhost ssh, p50", Value: fmtDur(p50), Baseline: "the same straight: " + fmtDur(s50),
		Ratio: ratio(float64(p50), float64(s50))})
	b.add(row{Figure: "`runCommand` of `true` through the hub over localhost ssh, p99", Value: fmtDur(hub.pct(99)), Baseline: "the same straight: " + fmtDur(straight.pct(99)),
		Ratio: ratio(float64(hub.pct(99)), float64(straight.pct(99)))})
	b.note("hub over ssh: as the local transport, the destination `ssh -T … root@127.0.0.1 toolhost --root …` to an OpenSSH sshd started for the figure on a free loopback port with keys made for it (%d rounds).", len(hub))
	return nil
}

// hubConcurrent measures 300 concurrent runCommand of `true`, 100 on each
// of three local destinations of one hub, against 100 on each of three
// servers straight, at once; medians of whole rounds, interleaved.
func (b *bench) hubConcurrent() error {
	const perDest, nDest = 100, 3
	var specs []string
	for i := range nDest {
		root, flags, err := b.farDir(fmt.Sprintf("hub-many-far%d", i))
		if err != nil {
			return err
		}
		specs = append(specs, "--destination", destFlag("d"+strconv.Itoa(i), append([]string{b.bin, "--root", root}, flags...)))
	}
	h, err := b.startServer("hub-many", append(specs, farFlags...)...)
	if err != nil {
		return err
	}
	defer h.end()
	var straight []*server
	for i := range nDest {
		s, err := b.startServer(fmt.Sprintf("hub-many-straight%d", i), farFlags...)
		if err != nil {
			return err
		}
		defer s.end()
		straight = append(straight, s)
	}
	// round sends 100 runCommand to each target at once and waits for
	// every answer.
	round := func(targets []*server, dests []string) (time.Duration, error) {
		ctx, cancel := limit()
		defer cancel()
		t0 := time.Now()
		var sent []*client.Pending
		for range perDest {
			for i, s := range targets {
				p, err := s.Send(ctx, protocol.MethodRunCommand, protocol.RunCommandParams{Argv: []string{"true"}, Destination: dests[i]})
				if err != nil {
					return 0, err
				}
				sent = append(sent, p)
			}
		}
		for _, p := range sent {
			var r protocol.ToolResult
			if err := p.Wait(ctx, &r); err != nil {
				return 0, err
			}
			if !r.Success {
				return 0, fmt.Errorf("runCommand true: %s %s", r.Status, r.Stderr)
			}
		}
		return time.Since(t0), nil
	}
	hubTargets, hubDests := []*server{h, h, h}, []string{"d0", "d1", "d2"}
	warm, n := 2, b.iters(15, 3)
	var got, base durations
	for i := range warm + n {
		d, err := round(hubTargets, hubDests)
		if err != nil {
			return fmt.Errorf("through the hub: %w", err)
		}
		e, err := round(straight, []string{"", "", ""})
		if err != nil {
			return fmt.Errorf("straight: %w", err)
		}
		if i >= warm {
			got, base = append(got, d), append(base, e)
		}
	}
	p50, s50 := got.pct(50), base.pct(50)
	b.add(row{Figure: "300 concurrent `runCommand` of `true` across 3 local destinations → every answer (median)", Value: fmtDur(p50),
		Baseline: "100 each to 3 servers straight, at once: " + fmtDur(s50), Ratio: ratio(float64(p50), float64(s50))})
	b.note("300 concurrent commands: %d rounds (after %d to warm up) of 100 `runCommand` of `true` to each of three local destinations of one hub, all sent before any answer is awaited, each round followed by the same 300 straight to three servers (one client each); time from the first write to the last answer.", n, warm)
	return nil
}

// errNoSSHD says this machine has no sshd for the ssh figure.
var errNoSSHD = errors.New("no sshd")

// benchSSHD is an OpenSSH server on a free loopback port with keys made
// for the figure: no password, no PAM. Pdeathsig ends it with the bench if
// stop is never called.
type benchSSHD struct {
	cmd  *exec.Cmd
	port int
	key  string
	log  *tailBuffer
	// exited is closed by the goroutine that reaps sshd.
	exited chan struct{}
	// logDone is closed by the goroutine that reads sshd's log, at its
	// end (when sshd and its sessions have all closed it).
	logDone chan struct{}
}

// tailBuffer keeps sshd's log for failures.
type tailBuffer struct {
	mu  sync.Mutex
	buf strings.Builder // guarded by mu
}

func (t *tailBuffer) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.WriteString(line + "\n")
}

func (t *tailBuffer) tail() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.buf.String()
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	return s
}

// startBenchSSHD makes keys and a configuration in dir and starts sshd in
// the foreground; it returns once sshd listens and lets the key in as
// root (a real `ssh … true`). errNoSSHD says sshd or ssh is missing.
func startBenchSSHD(dir string) (*benchSSHD, error) {
	const sshdPath = "/usr/sbin/sshd"
	if _, err := os.Stat(sshdPath); err != nil {
		return nil, fmt.Errorf("%w: %s is not installed (apt-get install openssh-server)", errNoSSHD, sshdPath)
	}
	for _, tool := range []string{"ssh", "ssh-keygen"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%w: %v", errNoSSHD, err)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for _, k := range []string{"hostkey", "userkey"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, k)).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ssh-keygen: %v: %s", err, out)
		}
	}
	pub, err := os.ReadFile(filepath.Join(dir, "userkey.pub"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600); err != nil {
		return nil, err
	}
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return nil, fmt.Errorf("sshd needs /run/sshd: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	conf := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(conf, []byte(strings.Join([]string{
		"Port " + strconv.Itoa(port), "ListenAddress 127.0.0.1",
		"HostKey " + filepath.Join(dir, "hostkey"), "AuthorizedKeysFile " + filepath.Join(dir, "authorized_keys"),
		"PasswordAuthentication no", "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password",
		"PidFile none", "StrictModes no", "UsePAM no", "UseDNS no", "MaxStartups 200:30:400", "MaxSessions 200",
	}, "\n")+"\n"), 0o600); err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	d := &benchSSHD{port: port, key: filepath.Join(dir, "userkey"), log: &tailBuffer{}, exited: make(chan struct{}), logDone: make(chan struct{})}
	d.cmd = exec.Command(sshdPath, "-D", "-e", "-f", conf)
	d.cmd.Stdout, d.cmd.Stderr = w, w
	d.cmd.SysProcAttr = sshdAttr()
	err = d.cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("starting sshd: %w", err)
	}
	listening := make(chan struct{})
	go func() { // the log reader, owned by stop, which waits on logDone
		defer close(d.logDone)
		defer r.Close()
		sc := bufio.NewScanner(r)
		var once sync.Once
		for sc.Scan() {
			d.log.add(sc.Text())
			if strings.Contains(sc.Text(), "Server listening on 127.0.0.1 port "+strconv.Itoa(port)) {
				once.Do(func() { close(listening) })
			}
		}
	}()
	go func() { // the reaper, owned by stop, which waits on exited
		_ = d.cmd.Wait()
		close(d.exited)
	}()
	select {
	case <-listening:
	case <-d.exited:
		return nil, fmt.Errorf("sshd exited: %s", d.log.tail())
	case <-time.After(30 * time.Second):
		d.stop()
		return nil, fmt.Errorf("sshd did not listen within 30 s: %s", d.log.tail())
	}
	if out, err := exec.Command("ssh", append(d.args(), "true")...).CombinedOutput(); err != nil {
		d.stop()
		return nil, fmt.Errorf("ssh to the bench's sshd: %v: %s (sshd log: %s)", err, out, d.log.tail())
	}
	return d, nil
}

// args are ssh(1)'s arguments up to the remote command.
func (d *benchSSHD) args() []string {
	return []string{"-T", "-i", d.key, "-p", strconv.Itoa(d.port),
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "root@127.0.0.1"}
}

// stop ends sshd and waits for it and for its log's reader (whose end
// also waits for the sessions sshd forked, bounded).
func (d *benchSSHD) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	select {
	case <-d.logDone:
	case <-time.After(10 * time.Second):
	}
}
