package hub

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"runtime"
	"slices"
	"strings"
)

// remoteProgram returns the index in argv of the far toolhost: the first
// word named toolhost (any directory), after the transport's own words;
// -1 if there is none. Bootstrap replaces that word, and runs `sh` in its
// place to install.
func remoteProgram(argv []string) int {
	for i, a := range argv {
		if i > 0 && path.Base(a) == "toolhost" {
			return i
		}
	}
	return -1
}

// errNotInstalled says the far side has no toolhost (the transport's
// command exited 127, as shells do for a command not found).
var errNotInstalled = errors.New("no toolhost on the far side")

// platforms maps Go's GOOS/GOARCH to what `uname -sm` prints.
var platforms = map[string][]string{
	"linux/amd64": {"Linux x86_64"},
	"linux/arm64": {"Linux aarch64", "Linux arm64"},
}

// bootstrap installs the running binary on the far side, over the same
// transport, into ~/.cache/toolhost/<version>/, unless that file is there
// already, and returns the argv that starts it. The far side must run the
// same OS on the same architecture.
func (d *Destination) bootstrap(ctx context.Context) ([]string, error) {
	i := remoteProgram(d.argv)
	if i < 0 {
		return nil, errors.New("cannot bootstrap: the destination's command names no program called toolhost to replace")
	}
	version := d.hub.opts.Version
	prefix := slices.Clone(d.argv[:i])
	// First ask where the binary goes and what the far side runs.
	probe := fmt.Sprintf("d=\"${HOME:-/tmp}/.cache/toolhost/%s\"\necho \"$d/toolhost\"\nuname -sm\nif [ -x \"$d/toolhost\" ]; then echo installed; else echo missing; fi\n", version)
	out, err := d.runSh(ctx, prefix, strings.NewReader(probe))
	if err != nil {
		return nil, fmt.Errorf("bootstrap probe: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "/") {
		return nil, fmt.Errorf("bootstrap probe: unexpected answer %q", out)
	}
	target, platform, state := lines[0], strings.TrimSpace(lines[1]), lines[2]
	want := runtime.GOOS + "/" + runtime.GOARCH
	if !slices.Contains(platforms[want], platform) {
		return nil, fmt.Errorf("cannot bootstrap: the far side runs %q, this toolhost is built for %s", platform, want)
	}
	if state != "installed" {
		if err := d.install(ctx, prefix, target); err != nil {
			return nil, err
		}
	}
	argv := append(prefix, target)
	return append(argv, d.argv[i+1:]...), nil
}

// install copies the running binary to target on the far side: a shell
// script on the transport's stdin carries it in base64 and moves it into
// place once whole.
func (d *Destination) install(ctx context.Context, prefix []string, target string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bootstrap: the running binary: %w", err)
	}
	bin, err := os.ReadFile(self)
	if err != nil {
		return fmt.Errorf("bootstrap: the running binary: %w", err)
	}
	var script bytes.Buffer
	fmt.Fprintf(&script, "set -e\nt=%s\nmkdir -p \"$(dirname \"$t\")\"\nbase64 -d > \"$t.tmp.$$\" <<'TOOLHOST_BOOTSTRAP_EOF'\n", shQuote(target))
	enc := base64.NewEncoder(base64.StdEncoding, &lineWriter{w: &script})
	_, _ = enc.Write(bin)
	_ = enc.Close()
	script.WriteString("\nTOOLHOST_BOOTSTRAP_EOF\nchmod 755 \"$t.tmp.$$\"\nmv -f \"$t.tmp.$$\" \"$t\"\necho installed\n")
	out, err := d.runSh(ctx, prefix, &script)
	if err != nil {
		return fmt.Errorf("bootstrap install: %w", err)
	}
	if strings.TrimSpace(string(out)) != "installed" {
		return fmt.Errorf("bootstrap install: unexpected answer %q", out)
	}
	d.hub.log.Info("installed toolhost on the destination", "destination", d.name, "path", target, "bytes", len(bin))
	return nil
}

// runSh runs `sh` through the transport's words, with script on its
// stdin, and returns its stdout.
func (d *Destination) runSh(ctx context.Context, prefix []string, script io.Reader) ([]byte, error) {
	argv := append(slices.Clone(prefix), "sh")
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = transportAttr()
	cmd.Stdin = script
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w; stderr: %s", strings.Join(argv, " "), err, strings.TrimSpace(tailOf(stderr.String(), 2000)))
	}
	return stdout.Bytes(), nil
}

// lineWriter breaks base64 into lines of 76 characters, as a heredoc
// likes them.
type lineWriter struct {
	w   *bytes.Buffer
	col int
}

func (l *lineWriter) Write(p []byte) (int, error) {
	for _, c := range p {
		if l.col == 76 {
			l.w.WriteByte('\n')
			l.col = 0
		}
		l.w.WriteByte(c)
		l.col++
	}
	return len(p), nil
}

// shQuote quotes s for a POSIX shell.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// tailOf returns the last n bytes of s.
func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// exitedNotFound reports whether a transport's exit says the command was
// not found (127).
func exitedNotFound(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == 127
}
