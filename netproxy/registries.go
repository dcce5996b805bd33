package netproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Source is where Registries found a host, or why a tool gave none.
type Source struct {
	// Tool is "go", "npm" or "pip".
	Tool string `json:"tool"`
	// Setting names what was read and where: "GOPROXY" or "GOSUMDB" (of
	// `go env`), an environment variable such as "NPM_CONFIG_REGISTRY" or
	// "PIP_INDEX_URL", a file and its key such as "/home/me/.npmrc
	// registry", "/home/me/.npmrc @corp:registry" or "/etc/pip.conf
	// global.index-url", or "default" for npm's or pip's built-in
	// registry.
	Setting string `json:"setting,omitempty"`
	// Value is the setting's value, or the part of it this Source is about.
	Value string `json:"value,omitempty"`
	// Rule is the entry it gave; zero when Note says why there is none.
	Rule Rule `json:"rule,omitzero"`
	// Note says why the tool or value gave no entry: the tool is not
	// installed, failed, a configuration file could not be read or
	// parsed, or the value is not a host ("direct", "off", a local path).
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

// runner is what Registries reads of the machine: lookPath finds a tool,
// run runs one (only go, whose settings `go env` alone knows) and returns
// its standard output, environ lists the environment, getwd is the
// directory npm would run in (its project's .npmrc is found from there),
// and etc is where the system-wide files are (/etc).
type runner struct {
	lookPath func(name string) (string, error)
	run      func(ctx context.Context, path string, env []string, args ...string) ([]byte, error)
	environ  func() []string
	getwd    func() (string, error)
	etc      string
}

// systemRunner reads the real machine.
var systemRunner = runner{
	lookPath: exec.LookPath,
	run: func(ctx context.Context, path string, env []string, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, path, args...)
		cmd.Env = append(os.Environ(), env...)
		// A grandchild holding the output open must not outlast ctx.
		cmd.WaitDelay = time.Second
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
	environ: os.Environ,
	getwd:   os.Getwd,
	etc:     "/etc",
}

// envMap returns environ (KEY=value entries) as a map; a later entry wins.
func envMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// readConfig reads a configuration file: nil and no note when it does
// not exist, nil and a note saying why when it cannot be read.
func readConfig(file string) ([]byte, string) {
	b, err := os.ReadFile(file)
	switch {
	case err == nil:
		return b, ""
	case errors.Is(err, fs.ErrNotExist):
		return nil, ""
	default:
		return nil, fmt.Sprintf("could not read %s, so its settings are not used: %v", file, err)
	}
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
//   - npm: the host of the registry npm would use, and of every scope's
//     (`@scope:registry`), read as npm reads them, without running npm
//     (see npmSources);
//   - pip: the hosts of the index-url, extra-index-url and http(s)
//     find-links that `pip install`, `pip download` and `pip wheel` would
//     use, read from pip's environment variables and configuration files
//     as pip reads them, without running pip (see pipSources); when a
//     command names no index (and no-index is not set), pypi.org and
//     files.pythonhosted.org.
//
// An https URL gives port 443 and an http one port 80, unless the URL
// names its port. A tool that is missing, or fails, gives no rules and a
// Source saying so; so does a configuration file that cannot be read or
// parsed. Only go is run (`go env`, tens of milliseconds): npm and pip
// took seconds to start on a loaded machine. The probes run concurrently,
// bounded by ctx. The rules are in the order of the sources, without
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
