//go:build !linux

package sandbox

import (
	"errors"
	"os/exec"
	"runtime"
)

// sysState is empty where nothing can be applied.
type sysState struct{}

// Probe reports that nothing is available off Linux.
func Probe() Capabilities {
	why := "not available on " + runtime.GOOS
	return Capabilities{Reasons: map[string]string{
		"landlock": why, "netns": why, "mountns": why, "seccomp": why,
		"pids": why, "memory": why, "cpu": why, "ptrace": why,
		"pidns": why, "proc": why, "masks": why,
	}}
}

// start is Start off Linux: it plans with Probe's answer whatever caps
// says, since nothing can be applied here, and starts cmd unconfined if
// Plan allows it.
func start(cmd *exec.Cmd, spec Spec, _ Capabilities) (*Sandbox, error) {
	if cmd.Process != nil {
		return nil, errors.New("sandbox: the command has already started")
	}
	ly, rep, err := plan(spec.Policy, spec.Limits, Probe())
	if rerr := ly.refusal(); rerr != nil {
		return nil, rerr // binds cannot be made here
	}
	if err != nil && (spec.Require || !errors.Is(err, ErrUnavailable)) {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &Sandbox{cmd: cmd, report: rep}, nil
}

// Finish has nothing to undo off Linux.
func (s *Sandbox) Finish() (Limit, error) { return "", nil }

// Drain waits for ProbeInBackground's goroutine; off Linux there is no
// confining goroutine.
func Drain() { probing.Wait() }
