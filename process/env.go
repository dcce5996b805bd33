package process

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Environment variables the package sets in every child. They are applied
// after Spec.Env and Step.Env, so a caller cannot forge or remove them.
const (
	// EnvCommand holds "<session nonce>/<commandID>". It attributes
	// descendants that leave the command's process group to the command.
	EnvCommand = "TOOLHOST_COMMAND"
	// EnvEventsFD names the file descriptor of the events pipe.
	EnvEventsFD = "TOOLHOST_EVENTS_FD"
	// eventsFD is the child's descriptor number for the events pipe: the
	// first of exec.Cmd.ExtraFiles.
	eventsFD = "3"
)

// defaultEnvAllow is the allowlist of the server's environment that children
// inherit (promise 4). Entries are path.Match patterns over variable names.
var defaultEnvAllow = []string{
	"PATH", "HOME", "USER", "SHELL", "LANG", "LC_*", "TERM", "TMPDIR",
	"http_proxy", "https_proxy", "no_proxy", "all_proxy",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
	"REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO",
}

// envAllowList matches variable names against the default allowlist plus
// the patterns from Config.EnvAllow.
type envAllowList struct {
	patterns []string
}

// newEnvAllowList validates extra patterns and returns the combined list.
func newEnvAllowList(extra []string) (envAllowList, error) {
	pats := append([]string(nil), defaultEnvAllow...)
	for _, p := range extra {
		if p == "" || strings.ContainsAny(p, "=\x00") {
			return envAllowList{}, fmt.Errorf("env allow pattern %q: %w", p, ErrInvalid)
		}
		if _, err := path.Match(p, ""); err != nil {
			return envAllowList{}, fmt.Errorf("env allow pattern %q: %v: %w", p, err, ErrInvalid)
		}
		pats = append(pats, p)
	}
	return envAllowList{patterns: pats}, nil
}

// envSecretPrefix begins the variables that hold the mounts' secrets
// (TOOLHOST_SECRET_<ID>, package mounts): none passes to a child, whatever
// the allowlist says.
const envSecretPrefix = "TOOLHOST_SECRET_"

// allowed reports whether name may pass from the server's environment.
func (l envAllowList) allowed(name string) bool {
	if strings.HasPrefix(name, envSecretPrefix) {
		return false
	}
	for _, p := range l.patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// filter returns the entries of base whose names are allowed, as a map.
// Later duplicates win, as they do for getenv in most libcs.
func (l envAllowList) filter(base []string) map[string]string {
	out := make(map[string]string)
	for _, kv := range base {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if l.allowed(k) {
			out[k] = v
		}
	}
	return out
}

// checkEnvOverrides rejects variable names a child environment cannot hold.
func checkEnvOverrides(field string, env map[string]*string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return &InvalidError{Field: field, Reason: fmt.Sprintf("bad variable name %q", k)}
		}
		if v != nil && strings.Contains(*v, "\x00") {
			return &InvalidError{Field: field + "." + k, Reason: "must not contain a NUL byte"}
		}
	}
	return nil
}

// applyEnv sets (or, for nil values, unsets) the overrides in env.
func applyEnv(env map[string]string, over map[string]*string) {
	for k, v := range over {
		if v == nil {
			delete(env, k)
		} else {
			env[k] = *v
		}
	}
}

// envList renders env as a sorted KEY=VALUE list.
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// resolveArgv0 finds the executable for argv0 the way the child's shell
// would: names with a slash are taken as paths (relative ones from dir),
// other names are searched in the child's PATH, not the server's. An empty
// PATH entry means dir. The error is a *SpawnError.
func resolveArgv0(argv0, dir, childPath string) (string, error) {
	if strings.Contains(argv0, "/") {
		p := argv0
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if err := checkExecutable(p); err != nil {
			return "", &SpawnError{Argv0: argv0, Reason: err.Error(), Err: err}
		}
		return p, nil
	}
	if childPath == "" {
		return "", &SpawnError{Argv0: argv0, Reason: "not found: PATH is empty in the child's environment", Err: fs.ErrNotExist}
	}
	var firstErr error
	for _, d := range filepath.SplitList(childPath) {
		if d == "" {
			d = dir
		}
		if !filepath.IsAbs(d) {
			if dir == "" {
				continue
			}
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, argv0)
		err := checkExecutable(p)
		if err == nil {
			return p, nil
		}
		if firstErr == nil && !errors.Is(err, fs.ErrNotExist) {
			firstErr = err
		}
	}
	if firstErr != nil {
		return "", &SpawnError{Argv0: argv0, Reason: firstErr.Error(), Err: firstErr}
	}
	return "", &SpawnError{Argv0: argv0, Reason: "not found in the child's PATH", Err: fs.ErrNotExist}
}

// errNotExecutable and errIsDirectory are the reasons checkExecutable gives
// besides the fs errors.
var (
	errNotExecutable = errors.New("not executable")
	errIsDirectory   = errors.New("is a directory")
)

// checkExecutable reports why p cannot be executed, or nil.
func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("not found: %w", fs.ErrNotExist)
		}
		return err
	}
	if fi.IsDir() {
		return errIsDirectory
	}
	if fi.Mode()&0o111 == 0 {
		return errNotExecutable
	}
	return nil
}
