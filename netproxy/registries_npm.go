package netproxy

import (
	"cmp"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// npmDefaultRegistry is npm's registry when no setting names another.
const npmDefaultRegistry = "https://registry.npmjs.org/"

// npmLayer is one source of npm's settings: its environment, or one npmrc
// file. vals holds the top-level keys, after ${VAR} replacement.
type npmLayer struct {
	// file is the npmrc's path; "" for the environment.
	file string
	vals map[string]string
	// vars names the variable that set each key of the environment.
	vars map[string]string
}

// setting names where key was set, for Source.Setting.
func (l npmLayer) setting(key string) string {
	if l.file == "" {
		return l.vars[key]
	}
	return l.file + " " + key
}

// npmGet returns the value of key in the first layer that sets it.
func npmGet(key string, layers ...npmLayer) (string, npmLayer, bool) {
	for _, l := range layers {
		if v, ok := l.vals[key]; ok {
			return v, l, true
		}
	}
	return "", npmLayer{}, false
}

// npmSources reads the registries npm would use, as npm 7 and later
// (@npmcli/config) read them, without running npm, which took a third of
// a second to seconds. Its layers, the first that sets a key winning:
//
//   - the environment: npm_config_<key> in any case (NPM_CONFIG_REGISTRY,
//     npm_config_registry), "_" standing for "-";
//   - the project's .npmrc, in the nearest directory above the working
//     directory (this process's, where `npm config get registry` used to
//     run) that holds package.json or node_modules, else the working
//     directory itself; not when it is the user's file. A workspace's root
//     above it is not looked for;
//   - the user's file: userconfig (NPM_CONFIG_USERCONFIG, or set in the
//     project's file), else ~/.npmrc;
//   - the global file: globalconfig, else $PREFIX/etc/npmrc, the prefix
//     being the setting prefix (NPM_CONFIG_PREFIX, or in the project's or
//     user's file), else the PREFIX variable, else two levels above the
//     real path of the node on PATH, as npm finds it;
//   - npm's builtin file, npmrc in npm's own directory.
//
// npmrc files are ini as npm reads them: key = value lines, quoted values
// unquoted, ";" and "#" comments, ${VAR} and ${VAR?} replaced from the
// environment; keys under a [section] are not npm's settings. The
// registry is "registry" (https://registry.npmjs.org/ by default); each
// scope's is "@scope:registry". A file npm would read that cannot be read
// gives a Source saying so; npm itself goes on without it too.
func npmSources(_ context.Context, r runner) []Source {
	bin, err := r.lookPath("npm")
	if err != nil {
		return []Source{{Tool: "npm", Note: "npm is not installed (not on PATH)"}}
	}
	environ := r.environ()
	env := envMap(environ)
	var notes []Source
	note := func(msg string) { notes = append(notes, Source{Tool: "npm", Note: msg}) }
	cwd, err := r.getwd()
	if err != nil {
		note("the working directory is unknown, so no project .npmrc is read: " + err.Error())
	}
	home := env["HOME"]
	// resolvePath resolves a path setting as npm does: ~/ from the home
	// directory, a relative path from the working directory.
	resolvePath := func(p string) string {
		if rest, ok := strings.CutPrefix(p, "~/"); ok && home != "" {
			return filepath.Join(home, rest)
		}
		if !filepath.IsAbs(p) {
			return filepath.Join(cwd, p)
		}
		return filepath.Clean(p)
	}
	load := func(file string) npmLayer {
		b, msg := readConfig(file)
		if msg != "" {
			note(msg)
		}
		return npmLayer{file: file, vals: parseNpmrc(string(b), env)}
	}

	envLayer := npmEnvLayer(environ, env)
	var builtin npmLayer
	if dir := npmPath(bin); dir != "" {
		builtin = load(filepath.Join(dir, "npmrc"))
	}
	userconfig := func(layers ...npmLayer) string {
		if v, _, ok := npmGet("userconfig", layers...); ok {
			return resolvePath(v)
		}
		if home == "" {
			return ""
		}
		return filepath.Join(home, ".npmrc")
	}
	var project npmLayer
	if cwd != "" {
		file := filepath.Join(npmLocalPrefix(cwd), ".npmrc")
		if file != userconfig(envLayer, builtin) {
			project = load(file)
		}
	}
	var user npmLayer
	if file := userconfig(envLayer, project, builtin); file != "" {
		user = load(file)
	} else {
		note("HOME is not set, so no ~/.npmrc is read")
	}
	globalconfig := ""
	if v, _, ok := npmGet("globalconfig", envLayer, project, user, builtin); ok {
		globalconfig = resolvePath(v)
	} else if v, _, ok := npmGet("prefix", envLayer, project, user, builtin); ok {
		globalconfig = filepath.Join(resolvePath(v), "etc", "npmrc")
	} else if prefix, msg := npmGlobalPrefix(r, env); msg != "" {
		note(msg)
	} else {
		globalconfig = filepath.Join(prefix, "etc", "npmrc")
	}
	var global npmLayer
	if globalconfig != "" {
		global = load(globalconfig)
	}

	layers := []npmLayer{envLayer, project, user, global, builtin}
	reg := Source{Tool: "npm", Setting: "default", Value: npmDefaultRegistry}
	if v, l, ok := npmGet("registry", layers...); ok {
		reg = Source{Tool: "npm", Setting: l.setting("registry"), Value: v}
	}
	reg.Rule, reg.Note = urlRule(reg.Value)
	out := []Source{reg}
	var scoped []Source
	seen := map[string]bool{}
	for _, l := range layers {
		for k, v := range l.vals {
			if seen[k] || !npmScopeRegistry.MatchString(k) {
				continue
			}
			seen[k] = true
			s := Source{Tool: "npm", Setting: l.setting(k), Value: v}
			s.Rule, s.Note = urlRule(v)
			scoped = append(scoped, s)
		}
	}
	slices.SortFunc(scoped, func(a, b Source) int { return cmp.Compare(a.Setting, b.Setting) })
	return append(append(out, scoped...), notes...)
}

// npmScopeRegistry matches the key of a scope's registry.
var npmScopeRegistry = regexp.MustCompile(`^@[^:/]+:registry$`)

// npmEnvLayer returns the settings of the environment: every
// npm_config_<key> variable, in any case, that is not empty; the key is
// lower-cased with "_" read as "-" (but a leading one, and in a "//host"
// key), as npm does.
func npmEnvLayer(environ []string, env map[string]string) npmLayer {
	l := npmLayer{vals: map[string]string{}, vars: map[string]string{}}
	const prefix = "npm_config_"
	for _, kv := range environ {
		name, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" || len(name) <= len(prefix) || !strings.EqualFold(name[:len(prefix)], prefix) {
			continue
		}
		key := name[len(prefix):]
		if !strings.HasPrefix(key, "//") {
			key = key[:1] + strings.ReplaceAll(key[1:], "_", "-")
			key = strings.ToLower(key)
		}
		key = npmEnvReplace(key, env)
		l.vals[key] = npmEnvReplace(strings.TrimSpace(v), env)
		l.vars[key] = name
	}
	return l
}

// npmPath returns npm's own directory, where its builtin npmrc is, from
// the npm found on PATH: the real path of that file is
// <dir>/bin/npm-cli.js. It returns "" for an npm laid out otherwise.
func npmPath(bin string) string {
	real, err := filepath.EvalSymlinks(bin)
	if err != nil || filepath.Base(real) != "npm-cli.js" || filepath.Base(filepath.Dir(real)) != "bin" {
		return ""
	}
	return filepath.Dir(filepath.Dir(real))
}

// npmGlobalPrefix returns npm's default global prefix: the PREFIX
// variable, else two directories above the real path of node (npm runs
// under the node on PATH; /usr/local/bin/node gives /usr/local), under
// DESTDIR when set. When node is not found it returns a note instead.
func npmGlobalPrefix(r runner, env map[string]string) (string, string) {
	if p := env["PREFIX"]; p != "" {
		return p, ""
	}
	node, err := r.lookPath("node")
	if err == nil {
		node, err = filepath.EvalSymlinks(node)
	}
	if err != nil {
		return "", "node is not found, so npm's global prefix is unknown and its global npmrc is not read: " + err.Error()
	}
	prefix := filepath.Dir(filepath.Dir(node))
	if d := env["DESTDIR"]; d != "" {
		prefix = filepath.Join(d, prefix)
	}
	return prefix, ""
}

// npmLocalPrefix returns the directory whose .npmrc is the project's
// when npm runs in cwd: the nearest at or above cwd that holds
// package.json or node_modules, else cwd.
func npmLocalPrefix(cwd string) string {
	for dir := cwd; ; {
		if exists(filepath.Join(dir, "package.json")) || exists(filepath.Join(dir, "node_modules")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return cwd
		}
		dir = parent
	}
}

// npmLineSplit splits an npmrc into lines as npm's ini parser does.
var npmLineSplit = regexp.MustCompile(`[\r\n]+`)

// npmSection matches an ini section header.
var npmSection = regexp.MustCompile(`^\[[^\]]*\]\s*$`)

// parseNpmrc returns the top-level settings of an npmrc, read as npm's
// ini parser reads it, keys and values with ${VAR} replaced from env.
// Settings under a [section] and array entries (key[]) are left out: no
// registry is either.
func parseNpmrc(data string, env map[string]string) map[string]string {
	out := map[string]string{}
	inSection := false
	for _, line := range npmLineSplit.Split(data, -1) {
		t := strings.TrimSpace(line)
		if t == "" || t[0] == ';' || t[0] == '#' {
			continue
		}
		if npmSection.MatchString(line) {
			inSection = true
			continue
		}
		k, v, hasValue := strings.Cut(line, "=")
		if k == "" || inSection {
			continue
		}
		key := npmEnvReplace(npmUnsafe(k), env)
		if len(key) > 2 && strings.HasSuffix(key, "[]") {
			continue
		}
		value := "true"
		if hasValue {
			value = npmUnsafe(v)
		}
		out[key] = npmEnvReplace(value, env)
	}
	return out
}

// npmUnsafe reads a key or value of an npmrc as npm's ini parser does:
// trimmed; a quoted one unquoted (a double-quoted one as JSON); else cut
// at the first ";" or "#" not escaped by a backslash.
func npmUnsafe(v string) string {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		if v[0] == '\'' {
			v = v[1 : len(v)-1]
		}
		var s string
		if json.Unmarshal([]byte(v), &s) == nil {
			return s
		}
		return v
	}
	var b strings.Builder
	esc := false
	for _, c := range v {
		switch {
		case esc:
			if !strings.ContainsRune(`\;#`, c) {
				b.WriteByte('\\')
			}
			b.WriteRune(c)
			esc = false
		case c == ';' || c == '#':
			return strings.TrimSpace(b.String())
		case c == '\\':
			esc = true
		default:
			b.WriteRune(c)
		}
	}
	if esc {
		b.WriteByte('\\')
	}
	return strings.TrimSpace(b.String())
}

// npmEnvExpr matches ${NAME} and ${NAME?}, with the backslashes before.
var npmEnvExpr = regexp.MustCompile(`(\\*)\$\{([^${}?]+)(\?)?\}`)

// npmEnvReplace replaces ${NAME} in s with the variable's value, as npm
// does: an unset one stays as written, unless written ${NAME?}, which
// gives ""; an odd number of backslashes before it escapes it.
func npmEnvReplace(s string, env map[string]string) string {
	if !strings.Contains(s, "${") {
		return s
	}
	return npmEnvExpr.ReplaceAllStringFunc(s, func(m string) string {
		g := npmEnvExpr.FindStringSubmatch(m)
		esc, name, optional := g[1], g[2], g[3] != ""
		if len(esc)%2 == 1 {
			return m[(len(esc)+1)/2:]
		}
		val, ok := env[name]
		if !ok {
			val = "${" + name + "}"
			if optional {
				val = ""
			}
		}
		return esc[len(esc)/2:] + val
	})
}

// exists says whether a file or directory is at p.
func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
