package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/toolhost/toolhost/netproxy"
	"github.com/toolhost/toolhost/protocol"
)

// registriesWait bounds how long the first session waits for the
// registries' hosts to be read (--network-allow-registries); what is not
// read by then is left out, and the log says so.
const registriesWait = 10 * time.Second

// serverLevel sets the command line's network allow-list, protected and
// denied paths on c.def: --sandbox-network allow with --network-allow
// and --network-allow-registries, --protect and --deny-read (with the
// agents' defaults, which main adds).
func (c *confinement) serverLevel(cfg SandboxConfig) error {
	if cfg.NetworkAllow != nil {
		patterns := slices.Clone(cfg.NetworkAllow)
		if cfg.Registries != nil {
			ctx, cancel := context.WithTimeout(context.Background(), registriesWait)
			patterns = append(patterns, cfg.Registries(ctx)...)
			cancel()
		}
		list, err := netproxy.ParseAllowList(patterns...)
		if err != nil {
			return fmt.Errorf("--network-allow: %w", err)
		}
		c.def.network, c.def.allow = true, &list
	}
	protect := cfg.Protect
	if g := cfg.GrantsDir; g != "" && c.contains(g) {
		if err := os.MkdirAll(g, 0o700); err != nil {
			return fmt.Errorf("the grants file's directory %s, in the root, cannot be made to protect it: %w", g, err)
		}
		protect = append(slices.Clone(protect), g)
	}
	var err error
	if c.def.protect, c.def.repos, err = c.addProtect(level{}, protect, "--protect"); err != nil {
		return err
	}
	if c.def.denyRead, err = c.addPaths(nil, cfg.DenyRead, "--deny-read", c.expandHome); err != nil {
		return err
	}
	return nil
}

// networkOffReason says why a request may not turn the network on.
const networkOffReason = "the network is off for this session (--sandbox-network off or initializationOptions.sandbox); a client may turn it off, never on"

// narrowNetwork returns base's network narrowed by asked: off, on, or an
// allow-list. A wider network than base's is InvalidParams naming field.
func narrowNetwork(base level, asked *protocol.Network, field string) (bool, *netproxy.AllowList, error) {
	switch {
	case asked.Allow == nil && !asked.On:
		return false, nil, nil
	case asked.Allow == nil:
		if !base.network {
			return false, nil, protocol.InvalidParams(field, networkOffReason)
		}
		if base.allow != nil {
			return false, nil, protocol.InvalidParams(field, "the network is limited to an allow-list for this session (%s); a client may narrow the list, never turn the whole network on", base.allow)
		}
		return true, nil, nil
	}
	rules := make([]netproxy.Rule, 0, len(asked.Allow))
	for i, p := range asked.Allow {
		r, err := netproxy.ParsePattern(p)
		if err != nil {
			return false, nil, protocol.InvalidParams(fmt.Sprintf("%s.allow[%d]", field, i), "%v", err)
		}
		rules = append(rules, r)
	}
	if !base.network {
		return false, nil, protocol.InvalidParams(field, networkOffReason)
	}
	if base.allow == nil {
		list := netproxy.NewAllowList(rules...)
		return true, &list, nil
	}
	for i, r := range rules {
		// Each entry on its own, so that the error names the first that
		// would widen the list.
		if _, err := base.allow.Narrow([]netproxy.Rule{r}); err != nil {
			return false, nil, protocol.InvalidParams(fmt.Sprintf("%s.allow[%d]", field, i), "%v; a client may narrow the server's list, never widen it", strings.ReplaceAll(err.Error(), "\n", "; "))
		}
	}
	list, err := base.allow.Narrow(rules)
	if err != nil {
		return false, nil, protocol.InvalidParams(field+".allow", "%v", err)
	}
	return true, &list, nil
}

// wire is the level's network as the protocol says it.
func (l level) wire() *protocol.Network {
	if l.allow != nil {
		return &protocol.Network{Allow: l.allow.Patterns()}
	}
	return &protocol.Network{On: l.network}
}

// errNotInRoot says a protected path is outside the workspace root.
var errNotInRoot = errors.New("not inside the workspace root")

// addPaths returns base with the paths asked added, each made absolute
// and clean by abs; field names asked for errors.
func (c *confinement) addPaths(base, asked []string, field string, abs func(string) (string, error)) ([]string, error) {
	out := slices.Clone(base)
	for i, p := range asked {
		a, err := abs(p)
		if err != nil {
			name := field
			if !strings.HasPrefix(field, "--") {
				name = fmt.Sprintf("%s[%d]", field, i)
			}
			return nil, protocol.InvalidParams(name, "%q: %v", p, err)
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out, nil
}

// inRoot resolves a protected path: relative to the root, or absolute
// inside it. It is not resolved through symlinks here: the sandbox opens
// it without following one.
func (c *confinement) inRoot(p string) (string, error) {
	if p == "" {
		return "", errors.New("an empty path")
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(c.root, p)
	}
	p = filepath.Clean(p)
	if rel, err := filepath.Rel(c.root, p); err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", errNotInRoot
	}
	return p, nil
}

// expandHome resolves a denied path: "~" and "~/…" are the server's
// $HOME; any other path must be absolute.
func (c *confinement) expandHome(p string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if c.home == "" {
			return "", errors.New(`"~" names the server's $HOME, which is not set`)
		}
		p = filepath.Join(c.home, strings.TrimPrefix(p, "~"))
	}
	if !filepath.IsAbs(p) {
		return "", errors.New(`must be absolute, or start with "~/"`)
	}
	return filepath.Clean(p), nil
}

// contains says path lies in the root (or is it), by name: the root is
// its real path, and path is taken as given.
func (c *confinement) contains(path string) bool {
	rel, err := filepath.Rel(c.root, filepath.Clean(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
