package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/toolhost/toolhost/approval"
	"github.com/toolhost/toolhost/netproxy"
	"github.com/toolhost/toolhost/process"
	"github.com/toolhost/toolhost/protocol"
)

// widen returns the level a request's sandbox asks for exactly, where it
// is wider than base, and the widening described for the user: a looser
// filesystem mode, the network on, or an allow-list with entries base's
// does not cover. What the request narrows it narrows as tighten does; it
// adds its protect and denyRead paths. An error says the sandbox is not
// wider but wrong (a malformed entry, say), or wider in a way never asked
// about (the whole filesystem writable, where the user's grants file
// is): it is refused as before.
func (c *confinement) widen(base level, asked *protocol.Sandbox) (level, string, error) {
	out := base
	var what []string
	if asked.Filesystem != "" {
		n, ok := strictness[asked.Filesystem]
		if !ok {
			return base, "", errors.New("an unknown filesystem mode")
		}
		if n < strictness[base.fs] {
			if asked.Filesystem == protocol.SandboxFull {
				// A command that may write everything could write the
				// user's grants file, and forge what the user allows.
				return base, "", errors.New("the whole filesystem is never asked for")
			}
			what = append(what, fmt.Sprintf("filesystem %s, where the server allows %s", asked.Filesystem, base.fs))
		}
		out.fs = asked.Filesystem
	}
	if asked.Network != nil {
		network, allow, err := narrowNetwork(base, asked.Network, "sandbox.network")
		if err != nil {
			if network, allow, err = exactNetwork(asked.Network); err != nil {
				return base, "", err
			}
			what = append(what, fmt.Sprintf("network %s, where the server allows %s", describeNetwork(network, allow), describeNetwork(base.network, base.allow)))
		}
		out.network, out.allow = network, allow
	}
	var err error
	if out.protect, out.repos, err = c.addProtect(base, asked.Protect, "sandbox.protect"); err != nil {
		return base, "", err
	}
	if out.denyRead, err = c.addPaths(base.denyRead, asked.DenyRead, "sandbox.denyRead", c.expandHome); err != nil {
		return base, "", err
	}
	if len(what) == 0 {
		return base, "", errors.New("not wider than the server allows")
	}
	return out, strings.Join(what, "; "), nil
}

// exactNetwork is the network asked, as asked: on, off, or exactly the
// allow-list given.
func exactNetwork(asked *protocol.Network) (bool, *netproxy.AllowList, error) {
	if asked.Allow == nil {
		return asked.On, nil, nil
	}
	list, err := netproxy.ParseAllowList(asked.Allow...)
	if err != nil {
		return false, nil, err
	}
	return true, &list, nil
}

// describeNetwork says a network for the user.
func describeNetwork(on bool, allow *netproxy.AllowList) string {
	switch {
	case allow != nil && len(allow.Patterns()) == 0:
		return "no host (an empty allow-list)"
	case allow != nil:
		return "only " + strings.Join(allow.Patterns(), ", ")
	case on:
		return "on"
	}
	return "off"
}

// askWider is the confinement's answer to a request whose sandbox the
// server refused with refusal: with a justification, a client that can be
// asked, and a sandbox that is wider (not malformed), the user is asked
// about the widening; allowed, the command gets exactly the sandbox asked.
// The outcome is added to outcomes, for the command's ToolResult.
func (t *Tools) askWider(ctx context.Context, c *confinement, p *protocol.RunCommandParams, refusal error, outcomes *[]protocol.ApprovalOutcome) (level, error) {
	var pe *protocol.Error
	if p.Justification == "" || c.mode == SandboxOff || !errors.As(refusal, &pe) || pe.Code != protocol.CodeInvalidParams {
		return level{}, refusal
	}
	wide, target, err := c.widen(c.def, p.Sandbox)
	if err != nil {
		return level{}, refusal
	}
	t.mu.Lock()
	a := t.asks
	t.mu.Unlock()
	if a == nil {
		return level{}, refusal
	}
	out := a.broker.Decide(ctx, approval.Request{Argv: p.Argv, Cwd: p.Cwd, Kind: approval.Sandbox, Target: target, Justification: p.Justification})
	*outcomes = append(*outcomes, wireOutcome(out))
	if !out.Allow {
		return level{}, protocol.NewError(protocol.CodeApprovalDenied,
			&protocol.ErrorData{Field: "sandbox", Kind: string(protocol.ApprovalSandbox), Target: target, DecidedBy: protocol.ApprovalDecidedBy(out.DecidedBy), Reason: out.Reason},
			"approval denied: %s (%s); the sandbox the server allows is %s", target, out.Reason, describeLevel(c.def))
	}
	return wide, nil
}

// describeLevel says a level's filesystem and network for the user.
func describeLevel(l level) string {
	return fmt.Sprintf("filesystem %s, network %s", l.fs, describeNetwork(l.network, l.allow))
}

// bindAsks gives cmd the outcomes of the asks made before it started
// (its sandbox's), kept for its ToolResult.
func (t *Tools) bindAsks(cmd *process.Command, outcomes []protocol.ApprovalOutcome) {
	if len(outcomes) == 0 {
		return
	}
	t.mu.Lock()
	a := t.asks
	t.mu.Unlock()
	if a == nil {
		return
	}
	a.mu.Lock()
	a.byID[cmd.ID()] = append(outcomes, a.byID[cmd.ID()]...)
	a.mu.Unlock()
}
