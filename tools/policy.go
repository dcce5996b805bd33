package tools

import (
	"errors"

	"github.com/toolhost/toolhost/protocol"
	"github.com/toolhost/toolhost/workspace"
)

// filePolicy returns the policy every file door of the session asks
// (readFile, writeFile, a progress file, snapshots): the protect and
// denyRead lists its commands get by default, so that a path a command
// cannot read or change cannot be read or changed through the server
// either. With the sandbox off the commands are not confined, but the
// doors still keep the command line's lists.
func (c *confinement) filePolicy(cfg SandboxConfig) (workspace.Policy, error) {
	p := workspace.Policy{Protect: c.def.protect, DenyRead: c.def.denyRead, Repos: c.def.repos}
	// The secrets file is read by no door, whatever the lists say.
	var err error
	if p.DenyRead, err = c.addPaths(p.DenyRead, cfg.HiddenFiles, "--secrets", c.expandHome); err != nil {
		return p, err
	}
	if c.mode != SandboxOff {
		return p, nil
	}
	if p.Protect, p.Repos, err = c.addProtect(c.def, cfg.Protect, "--protect"); err != nil {
		return p, err
	}
	if p.DenyRead, err = c.addPaths(p.DenyRead, cfg.DenyRead, "--deny-read", c.expandHome); err != nil {
		return p, err
	}
	return p, nil
}

// policyError is the wire error of a path the policy refuses: -32001
// PathOutsideWorkspace, its data naming the policy and the entry.
func policyError(pe *workspace.PathError) error {
	return protocol.NewError(protocol.CodePathOutsideWorkspace, &protocol.ErrorData{
		Path: pe.Path, Reason: pe.Reason, Policy: pe.Policy, Entry: pe.Entry,
	}, "%v", pe)
}

// isPolicy returns the *workspace.PathError of a policy refusal in err.
func isPolicy(err error) (*workspace.PathError, bool) {
	var pe *workspace.PathError
	if errors.As(err, &pe) && errors.Is(err, workspace.ErrPolicy) {
		return pe, true
	}
	return nil, false
}
