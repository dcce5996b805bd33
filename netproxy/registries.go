package netproxy

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Source is where Registries found a host, or why a tool gave none.
type Source struct {
	// Tool is "go", "npm" or "pip".
	Tool string `json:"tool"`
	// Setting names what was read: "GOPROXY", "GOSUMDB", "registry",
	// a pip key such as "global.index-url", an environment variable such
	// as "PIP_INDEX_URL", or "default" for pip's built-in index.
	Setting string `json:"setting,omitempty"`
	// Value is the setting's value, or the part of it this Source is about.
	Value string `json:"value,omitempty"`
	// Rule is the entry it gave; zero when Note says why there is none.
	Rule Rule `json:"rule,omitzero"`
	// Note says why the tool or value gave no entry: the tool is not
	// installed, failed, or the value is not a host ("direct", "off", a
	// local path).
	Note string `json:"note,omitempty"`
}

// String returns "tool setting=value: rule" or "tool: note", for logs.
func (s Source) String() string {
	var b strings.Builder
	b.WriteString(s.Tool)
	if s.Setting != "" {
		fmt.Fprintf(&b, " %s=%s", s.Setting, s.Value)
	}
	if s.Rule != (Rule{}) {
		b.WriteString(": " + s.Rule.String())
	}
	if s.Note != "" {
		b.WriteString(": " + s.Note)
	}
	return b.String()
}

// runner runs a tool and returns its standard output; lookPath finds it.
type runner struct {
	lookPath func(name string) (string, error)
	run      func(ctx context.Context, path string, env []string, args ...string) ([]byte, error)
	getenv   func(key string) string
}

// systemRunner runs the real tools.
var systemRunner = runner{
	lookPath: exec.LookPath,
	run: func(ctx context.Context, path string, env []string, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, path, args...)
		cmd.Env = append(os.Environ(), env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			if msg := strings.TrimSpace(stderr.String()); msg != "" {
				err = fmt.Errorf("%w: %s", err, firstLine(msg))
			}
			return nil, err
		}
		return out, nil
	},
	getenv: os.Getenv,
}

// Registries returns the hosts the machine's Go, npm and pip are
// configured to fetch from, as rules, and where each came from:
//
//   - go: the hosts of the URLs in `go env GOPROXY` (its comma- and
//     pipe-separated list; "direct" and "off" name no host), and the
//     checksum database of GOSUMDB unless it is "off": the URL's host in
//     the "name+key url" form, else the name's (sum.golang.org by default,
//     which the go command reaches directly when the proxy does not serve
//     it);
//   - npm: the host of `npm config get registry`;
//   - pip: the hosts of every index-url, extra-index-url and http(s)
//     find-links in `pip config list`, PIP_INDEX_URL and
//     PIP_EXTRA_INDEX_URL; when pip is installed and names no index (and
//     no-index is not set), pypi.org and files.pythonhosted.org.
//
// An https URL gives port 443 and an http one port 80, unless the URL
// names its port. A tool that is missing, or fails, gives no rules and a
// Source saying so. The tools run concurrently, each bounded by ctx (npm
// alone can take a third of a second): start Registries early, and wait
// for it late. The rules are in the order of the sources, without
// duplicates.
func Registries(ctx context.Context) (rules []Rule, found []Source) {
	return registries(ctx, systemRunner)
}

// registries is Registries with the tools run by r.
func registries(ctx context.Context, r runner) ([]Rule, []Source) {
	probes := []func(context.Context, runner) []Source{goSources, npmSources, pipSources}
	results := make([][]Source, len(probes))
	var wg sync.WaitGroup // Registries owns these goroutines and waits for them
	for i, probe := range probes {
		wg.Go(func() { results[i] = probe(ctx, r) })
	}
	wg.Wait()
	var rules []Rule
	var found []Source
	for _, srcs := range results {
		for _, s := range srcs {
			found = append(found, s)
			if s.Rule != (Rule{}) && !containsRule(rules, s.Rule) {
				rules = append(rules, s.Rule)
			}
		}
	}
	return rules, found
}

func containsRule(rules []Rule, r Rule) bool {
	for _, x := range rules {
		if x == r {
			return true
		}
	}
	return false
}

// goSources runs `go env GOPROXY GOSUMDB`.
func goSources(ctx context.Context, r runner) []Source {
	bin, err := r.lookPath("go")
	if err != nil {
		return []Source{{Tool: "go", Note: "go is not installed (not on PATH)"}}
	}
	// GOTOOLCHAIN=local: never download a toolchain just to print two
	// settings.
	out, err := r.run(ctx, bin, []string{"GOTOOLCHAIN=local"}, "env", "GOPROXY", "GOSUMDB")
	if err != nil {
		return []Source{{Tool: "go", Note: "go env failed: " + err.Error()}}
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != 2 {
		return []Source{{Tool: "go", Note: fmt.Sprintf("go env printed %d lines, not 2", len(lines))}}
	}
	return append(parseGOPROXY(strings.TrimSpace(lines[0])), parseGOSUMDB(strings.TrimSpace(lines[1]))...)
}

// parseGOPROXY returns the sources of a GOPROXY value.
func parseGOPROXY(v string) []Source {
	if v == "" {
		return []Source{{Tool: "go", Setting: "GOPROXY", Note: "GOPROXY is empty"}}
	}
	var out []Source
	for item := range strings.FieldsFuncSeq(v, func(r rune) bool { return r == ',' || r == '|' }) {
		item = strings.TrimSpace(item)
		s := Source{Tool: "go", Setting: "GOPROXY", Value: item}
		switch {
		case item == "":
			continue
		case item == "direct":
			s.Note = "direct: modules are fetched from their own origin hosts, which are not listed"
		case item == "off":
			s.Note = "off: no module downloads"
		default:
			// As the go command does: a bare host or host/path is https.
			u := item
			if strings.ContainsAny(u, ".:/") && !strings.Contains(u, ":/") && !filepath.IsAbs(u) && !path.IsAbs(u) {
				u = "https://" + u
			}
			s.Rule, s.Note = urlRule(u)
		}
		out = append(out, s)
	}
	return out
}

// parseGOSUMDB returns the source of a GOSUMDB value: "off", "name",
// "name+key" or "name+key url".
func parseGOSUMDB(v string) []Source {
	s := Source{Tool: "go", Setting: "GOSUMDB", Value: v}
	f := strings.Fields(v)
	switch {
	case len(f) == 0:
		s.Note = "GOSUMDB is empty"
	case f[0] == "off":
		s.Note = "off: no checksum database"
	case len(f) >= 2:
		u := f[1]
		if !strings.Contains(u, "://") {
			u = "https://" + u
		}
		s.Rule, s.Note = urlRule(u)
	default:
		name, _, _ := strings.Cut(f[0], "+")
		s.Rule, s.Note = urlRule("https://" + name)
	}
	return []Source{s}
}

// npmSources runs `npm config get registry`.
func npmSources(ctx context.Context, r runner) []Source {
	bin, err := r.lookPath("npm")
	if err != nil {
		return []Source{{Tool: "npm", Note: "npm is not installed (not on PATH)"}}
	}
	out, err := r.run(ctx, bin, []string{"NO_UPDATE_NOTIFIER=1", "npm_config_update_notifier=false"}, "config", "get", "registry")
	if err != nil {
		return []Source{{Tool: "npm", Note: "npm config get registry failed: " + err.Error()}}
	}
	return []Source{parseNpmRegistry(string(out))}
}

// parseNpmRegistry returns the source of `npm config get registry`'s output.
func parseNpmRegistry(out string) Source {
	v := strings.TrimSpace(lastLine(out))
	s := Source{Tool: "npm", Setting: "registry", Value: v}
	s.Rule, s.Note = urlRule(v)
	return s
}

// pipSources runs `pip config list` (or pip3's) and reads pip's
// environment variables.
func pipSources(ctx context.Context, r runner) []Source {
	bin, err := r.lookPath("pip")
	if err != nil {
		bin, err = r.lookPath("pip3")
	}
	if err != nil {
		return []Source{{Tool: "pip", Note: "pip is not installed (neither pip nor pip3 on PATH)"}}
	}
	out, err := r.run(ctx, bin, []string{"PIP_DISABLE_PIP_VERSION_CHECK=1"}, "config", "list")
	if err != nil {
		return []Source{{Tool: "pip", Note: "pip config list failed: " + err.Error()}}
	}
	return parsePip(string(out), r.getenv)
}

// parsePip returns the sources of `pip config list`'s output (lines of
// section.key='value') and of PIP_INDEX_URL, PIP_EXTRA_INDEX_URL and
// PIP_NO_INDEX, read with getenv; with no index named and no-index unset,
// pip's defaults.
func parsePip(out string, getenv func(string) string) []Source {
	var srcs []Source
	indexNamed, noIndex := false, false
	add := func(setting, value string) {
		key := setting
		if i := strings.LastIndexByte(key, '.'); i >= 0 {
			key = key[i+1:]
		}
		key = strings.ReplaceAll(strings.ToLower(key), "_", "-")
		if strings.HasPrefix(key, "pip-") { // PIP_INDEX_URL and the like
			key = key[len("pip-"):]
		}
		switch key {
		case "index-url", "extra-index-url", "find-links":
		case "no-index":
			switch strings.ToLower(strings.TrimSpace(value)) {
			case "1", "true", "yes", "on":
				noIndex = true
			}
			return
		default:
			return
		}
		if key == "index-url" {
			indexNamed = true
		}
		for _, u := range strings.Fields(strings.ReplaceAll(value, `\n`, " ")) {
			s := Source{Tool: "pip", Setting: setting, Value: u}
			if key == "find-links" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
				continue // a local directory
			}
			s.Rule, s.Note = urlRule(u)
			srcs = append(srcs, s)
		}
	}
	fromEnv := map[string]bool{} // keys pip itself reported from its environment
	for line := range strings.Lines(out) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		if name, ok := strings.CutPrefix(k, ":env:."); ok {
			fromEnv[strings.ReplaceAll(strings.ToLower(name), "_", "-")] = true
		}
		add(k, unquote(v))
	}
	// Older pips do not list their environment: read it here, once.
	for _, k := range []string{"PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX"} {
		key := strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(k, "PIP_")), "_", "-")
		if v := getenv(k); v != "" && !fromEnv[key] {
			add(k, v)
		}
	}
	if !indexNamed && !noIndex {
		for _, u := range []string{"https://pypi.org/simple", "https://files.pythonhosted.org/packages"} {
			s := Source{Tool: "pip", Setting: "default", Value: u}
			s.Rule, s.Note = urlRule(u)
			srcs = append(srcs, s)
		}
	}
	return srcs
}

// unquote undoes the quotes pip config list puts around a value.
func unquote(v string) string {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && (v[0] == '\'' || v[0] == '"') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}

// urlRule returns the rule for an http(s) URL's host: its port, else 443
// for https and 80 for http. For anything else it returns a note saying
// why there is none.
func urlRule(raw string) (Rule, string) {
	u, err := url.Parse(raw)
	if err != nil {
		return Rule{}, "not a URL: " + err.Error()
	}
	var port int
	switch strings.ToLower(u.Scheme) {
	case "https":
		port = 443
	case "http":
		port = 80
	case "file":
		return Rule{}, "a local file URL names no host"
	default:
		return Rule{}, fmt.Sprintf("not an http(s) URL (scheme %q)", u.Scheme)
	}
	if u.Hostname() == "" {
		return Rule{}, "the URL has no host"
	}
	if ps := u.Port(); ps != "" {
		p, err := strconv.Atoi(ps)
		if err != nil {
			return Rule{}, "bad port: " + err.Error()
		}
		port = p
	}
	host := u.Hostname()
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	r, err := ParsePattern(host + ":" + strconv.Itoa(port))
	if err != nil {
		return Rule{}, err.Error()
	}
	return r, ""
}

// firstLine returns s up to its first newline.
func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
