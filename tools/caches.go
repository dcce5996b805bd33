package tools

import (
	"path/filepath"
	"strings"
)

// cacheVars are the variables that point tools at their caches, each with
// its directory in the cache directory ("" for the directory itself).
// GOPATH is there for what Go keeps in it besides the module cache: the
// checksum database's state (pkg/sumdb), which go mod download writes, and
// would otherwise find read-only in ~/go.
var cacheVars = map[string]string{
	"XDG_CACHE_HOME":   "",
	"GOCACHE":          "go-build",
	"GOMODCACHE":       "go-mod",
	"GOPATH":           "go-path",
	"npm_config_cache": "npm",
	"PIP_CACHE_DIR":    "pip",
}

// useRootCache points the session's caches at its root's cache directory
// in the state directory (cfg.RootCache), shared by the commands of that
// root only, across sessions, so that a new session finds Go's build and
// module caches, npm's and pip's warm. The key is the root's canonical
// real path. It keeps the session directory's cache where there is no
// state directory, or where the root or a --writable directory holds the
// caches' directory (a root of $HOME): a command there could write every
// root's cache, and its own would be no safer. It also records the cache
// variables the server's environment sets (cfg.Env), which commands get
// as they are.
func (c *confinement) useRootCache(cfg SandboxConfig) {
	c.userCache = make(map[string]string)
	for _, kv := range cfg.Env {
		k, v, ok := strings.Cut(kv, "=")
		if _, known := cacheVars[k]; ok && known && v != "" {
			c.userCache[k] = v
		}
	}
	if cfg.RootCache == nil {
		return
	}
	root, err := filepath.EvalSymlinks(c.root)
	if err != nil {
		return
	}
	dir, err := cfg.RootCache(root)
	if err != nil {
		return
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return
	}
	holders := append([]string{root}, c.writable...)
	for _, h := range holders {
		if rel, err := filepath.Rel(h, filepath.Dir(dir)); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return
		}
	}
	c.cache = dir
}

// cacheEnv returns env with the cache variables pointed at the cache
// directory, or at the server's environment's values where it sets them
// (those are the user's: writable to a command only if a --writable
// directory holds them), except those env sets or unsets.
func (c *confinement) cacheEnv(env map[string]*string) map[string]*string {
	cache := c.cacheDir()
	out := make(map[string]*string, len(env)+len(cacheVars))
	for k, sub := range cacheVars {
		v := filepath.Join(cache, sub)
		if u, ok := c.userCache[k]; ok {
			v = u
		}
		out[k] = &v
	}
	for k, v := range env {
		out[k] = v
	}
	return out
}
