package persist

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// FrontConfig configures a front: a `toolhost --persist` that hands its
// connection to the holder of its root.
type FrontConfig struct {
	Dirs Dirs
	// Root is the workspace root, resolved (symlinks evaluated): it
	// names the holder.
	Root string
	// Build names this binary; Version is its version.
	Build string
	// Args, Env and Cwd are the front's own: the session's configuration.
	Args []string
	Env  []string
	Cwd  string
	// HolderArgs are the extra arguments to start a holder with (its log
	// level, say).
	HolderArgs []string
	// Mode is the protocol the client speaks: "" for toolhost's own,
	// ModeMCP for MCP.
	Mode string
	// HTTP are the HTTP flags of `toolhost mcp --persist --http`, left
	// out of Args: the holder serves Args' shared MCP server over HTTP.
	HTTP []string
}

// holderStartTimeout bounds how long a front waits for the holder it
// started to listen.
const holderStartTimeout = 10 * time.Second

// Serve hands the connection on stdin, stdout and stderr, and the bytes
// already read from stdin (prefix), to the holder of the root, starting
// one if none answers, and waits until the holder says the connection
// ended. It returns the exit code the holder gives.
func Serve(cfg FrontConfig, prefix []byte, stdin, stdout, stderr *os.File) (int, error) {
	if !supported {
		return 1, errors.New("--persist is not supported on this platform")
	}
	key := holderKey(cfg.Root, cfg.Build)
	c, err := dialHolder(cfg, key)
	if err != nil {
		return 1, err
	}
	defer c.Close()
	uid, err := peerUID(c)
	if err != nil || uid != os.Geteuid() {
		return 1, fmt.Errorf("the holder socket %s is served by uid %d, not this user: refusing it", cfg.Dirs.socketPath(key), uid)
	}
	hl := hello{V: wireVersion, Build: cfg.Build, Args: cfg.Args, Env: cfg.Env, Cwd: cfg.Cwd, Prefix: prefix, Mode: cfg.Mode, HTTP: cfg.HTTP}
	b, err := hl.encode()
	if err != nil {
		return 1, err
	}
	if err := sendFrame(c, b, []int{int(stdin.Fd()), int(stdout.Fd()), int(stderr.Fd())}); err != nil {
		return 1, fmt.Errorf("cannot hand the connection to the holder: %w", err)
	}
	vb, _, err := recvFrame(c, 0)
	if err != nil {
		return 1, fmt.Errorf("the holder ended without an answer: %w", err)
	}
	var v verdict
	if err := json.Unmarshal(vb, &v); err != nil {
		return 1, fmt.Errorf("the holder's answer does not decode: %w", err)
	}
	if v.Error != "" {
		return v.Exit, errors.New(v.Error)
	}
	return v.Exit, nil
}

// dialHolder connects to the holder of key, starting one when none
// answers.
func dialHolder(cfg FrontConfig, key string) (*net.UnixConn, error) {
	path := cfg.Dirs.socketPath(key)
	if c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"}); err == nil {
		return c, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(cfg.Dirs.logPath(key), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("the holder's log: %w", err)
	}
	defer logf.Close()
	args := append([]string{"holder", "--root", cfg.Root, "--state-dir", cfg.Dirs.State, "--run-dir", cfg.Dirs.Run}, cfg.HolderArgs...)
	cmd := exec.Command(exe, args...)
	cmd.Stderr = logf
	cmd.Dir = "/"
	cmd.Env = cfg.Env
	// A session of its own: neither the client's end, nor a signal to the
	// front's process group or terminal, reaches the holder.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start the holder: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // reaps the holder if it exits while this front lives; ends with it
	deadline := time.Now().Add(holderStartTimeout)
	wait := time.Millisecond
	for {
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
		if err == nil {
			return c, nil
		}
		select {
		case werr := <-exited:
			// It exited: another holder won the lock (it serves now), or
			// it failed (its log says why).
			if c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"}); err == nil {
				return c, nil
			}
			return nil, fmt.Errorf("the holder exited (%v) without serving; its log %s says: %s", werr, cfg.Dirs.logPath(key), logTail(cfg.Dirs.logPath(key)))
		case <-time.After(wait):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the holder did not listen on %s within %v: %w", path, holderStartTimeout, err)
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// logTail returns the last lines of a log file.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	return s
}
