package netproxy

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ruleText compares rules by their canonical text.
var ruleText = cmp.Transformer("rule", func(r Rule) string { return r.String() })

// rule parses a pattern for a table, panicking on a bad one.
func rule(s string) Rule {
	r, err := ParsePattern(s)
	if err != nil {
		panic(err)
	}
	return r
}

func TestParseGOPROXY(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []Source
	}{
		{"https://proxy.golang.org,direct", []Source{
			{Tool: "go", Setting: "GOPROXY", Value: "https://proxy.golang.org", Rule: rule("proxy.golang.org:443")},
			{Tool: "go", Setting: "GOPROXY", Value: "direct", Note: "direct: modules are fetched from their own origin hosts, which are not listed"},
		}},
		{"https://goproxy.corp.example:8443/go|https://Proxy.Golang.org/,off", []Source{
			{Tool: "go", Setting: "GOPROXY", Value: "https://goproxy.corp.example:8443/go", Rule: rule("goproxy.corp.example:8443")},
			{Tool: "go", Setting: "GOPROXY", Value: "https://Proxy.Golang.org/", Rule: rule("proxy.golang.org:443")},
			{Tool: "go", Setting: "GOPROXY", Value: "off", Note: "off: no module downloads"},
		}},
		{"http://10.1.2.3:3000, goproxy.io", []Source{
			{Tool: "go", Setting: "GOPROXY", Value: "http://10.1.2.3:3000", Rule: rule("10.1.2.3:3000")},
			{Tool: "go", Setting: "GOPROXY", Value: "goproxy.io", Rule: rule("goproxy.io:443")},
		}},
		{"http://[::1]:3000", []Source{
			{Tool: "go", Setting: "GOPROXY", Value: "http://[::1]:3000", Rule: rule("[::1]:3000")},
		}},
		{"file:///srv/goproxy,direct", []Source{
			{Tool: "go", Setting: "GOPROXY", Value: "file:///srv/goproxy", Note: "a local file URL names no host"},
			{Tool: "go", Setting: "GOPROXY", Value: "direct", Note: "direct: modules are fetched from their own origin hosts, which are not listed"},
		}},
		{"", []Source{{Tool: "go", Setting: "GOPROXY", Note: "GOPROXY is empty"}}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, parseGOPROXY(tc.in), ruleText); diff != "" {
				t.Errorf("parseGOPROXY(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestParseGOSUMDB(t *testing.T) {
	for _, tc := range []struct {
		in   string
		rule string // "" for none
		note string
	}{
		{"sum.golang.org", "sum.golang.org:443", ""},
		{"sum.golang.google.cn", "sum.golang.google.cn:443", ""},
		{"sum.golang.org+033de0ae+Ac4zctda0e5eza+HJyk9SxEdh+s3Ux18htTTAD8OuAn8", "sum.golang.org:443", ""},
		{"sum.golang.org+033de0ae+Ac4z https://sum.golang.google.cn", "sum.golang.google.cn:443", ""},
		{"sumdb.corp.example+key https://sumdb.corp.example:9443/db", "sumdb.corp.example:9443", ""},
		{"sumdb.corp.example+key sumdb-mirror.corp.example", "sumdb-mirror.corp.example:443", ""},
		{"off", "", "off: no checksum database"},
		{"", "", "GOSUMDB is empty"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			want := []Source{{Tool: "go", Setting: "GOSUMDB", Value: tc.in, Note: tc.note}}
			if tc.rule != "" {
				want[0].Rule = rule(tc.rule)
			}
			if diff := cmp.Diff(want, parseGOSUMDB(tc.in), ruleText); diff != "" {
				t.Errorf("parseGOSUMDB(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// machine is a made-up machine for the registry probes: its files are
// under a temporary directory, its environment and tools are the test's.
type machine struct {
	dir   string            // holds every file of the machine
	env   map[string]string // the environment
	cwd   string            // the working directory
	tools map[string]string // a tool's path by name; absent: not on PATH
}

// newMachine returns a machine with npm, node and pip installed, HOME at
// <dir>/home, the working directory <dir>/work, and XDG_CONFIG_DIRS at
// <dir>/xdg: nothing configured.
func newMachine(t *testing.T) *machine {
	t.Helper()
	m := &machine{dir: t.TempDir()}
	m.env = map[string]string{"HOME": m.path("home"), "XDG_CONFIG_DIRS": m.path("xdg")}
	m.cwd = m.path("work")
	m.tools = map[string]string{"npm": m.path("usr/bin/npm"), "node": m.path("usr/bin/node"), "pip": m.path("usr/bin/pip")}
	for _, d := range []string{"home", "work", "etc", "usr/bin"} {
		if err := os.MkdirAll(m.path(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	m.write(t, "usr/bin/node", "") // npm's default prefix is found from node's real path
	return m
}

// path returns the machine's path of rel.
func (m *machine) path(rel string) string { return filepath.Join(m.dir, rel) }

// write writes a file of the machine, making its directories.
func (m *machine) write(t *testing.T, rel, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(m.path(rel)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.path(rel), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runner returns the runner that reads the machine; it runs no tool.
func (m *machine) runner() runner {
	return runner{
		lookPath: func(name string) (string, error) {
			if p, ok := m.tools[name]; ok {
				return p, nil
			}
			return "", exec.ErrNotFound
		},
		run: func(ctx context.Context, path string, env []string, args ...string) ([]byte, error) {
			return nil, errors.New("the made-up machine runs no tool")
		},
		environ: func() []string {
			var out []string
			for k, v := range m.env {
				out = append(out, k+"="+v)
			}
			return out
		},
		getwd: func() (string, error) { return m.cwd, nil },
		etc:   m.path("etc"),
	}
}

// src is a Source with the rule parsed from pattern ("" for none) and
// the machine's directory written as $D in setting and note.
func src(tool, setting, value, pattern, note string) Source {
	s := Source{Tool: tool, Setting: setting, Value: value, Note: note}
	if pattern != "" {
		s.Rule = rule(pattern)
	}
	return s
}

// relative writes the machine's directory in the sources' settings and
// notes as $D, for tables.
func relative(m *machine, srcs []Source) []Source {
	out := slices.Clone(srcs)
	for i := range out {
		out[i].Setting = strings.ReplaceAll(out[i].Setting, m.dir, "$D")
		out[i].Note = strings.ReplaceAll(out[i].Note, m.dir, "$D")
	}
	return out
}

func TestNpmSources(t *testing.T) {
	npmjs := src("npm", "default", "https://registry.npmjs.org/", "registry.npmjs.org:443", "")
	for _, tc := range []struct {
		name  string
		files map[string]string // by path under the machine's directory
		env   map[string]string // added to the machine's; $D is its directory
		cwd   string            // under the machine's directory; "" for work
		want  []Source
	}{
		{name: "nothing configured: npm's default", want: []Source{npmjs}},
		{
			name:  "the user's ~/.npmrc, with comments, quotes and an inline comment",
			files: map[string]string{"home/.npmrc": "; a comment\n# another\ncache=/tmp/x\nregistry = \"https://npm.corp.example:4873/\"  \n//npm.corp.example:4873/:_authToken=secret\n"},
			want:  []Source{src("npm", "$D/home/.npmrc registry", "https://npm.corp.example:4873/", "npm.corp.example:4873", "")},
		},
		{
			name:  "an unquoted value ends at a comment",
			files: map[string]string{"home/.npmrc": "registry=http://verdaccio.local/ ; the team's\n"},
			want:  []Source{src("npm", "$D/home/.npmrc registry", "http://verdaccio.local/", "verdaccio.local:80", "")},
		},
		{
			name:  "${VAR} in a value; a key under a [section] is no setting",
			files: map[string]string{"home/.npmrc": "registry=https://${NPM_HOST}/npm/\n[other]\nregistry=https://ignored.example/\n"},
			env:   map[string]string{"NPM_HOST": "mirror.example"},
			want:  []Source{src("npm", "$D/home/.npmrc registry", "https://mirror.example/npm/", "mirror.example:443", "")},
		},
		{
			name:  "NPM_CONFIG_REGISTRY wins over every file",
			files: map[string]string{"home/.npmrc": "registry=https://user.example/\n", "work/.npmrc": "registry=https://project.example/\n"},
			env:   map[string]string{"NPM_CONFIG_REGISTRY": "https://env.example/"},
			want:  []Source{src("npm", "NPM_CONFIG_REGISTRY", "https://env.example/", "env.example:443", "")},
		},
		{
			name: "npm_config_registry, lower case",
			env:  map[string]string{"npm_config_registry": "https://lower.example/"},
			want: []Source{src("npm", "npm_config_registry", "https://lower.example/", "lower.example:443", "")},
		},
		{
			name:  "the project's .npmrc, found above the working directory by its package.json, wins over the user's",
			files: map[string]string{"home/.npmrc": "registry=https://user.example/\n", "proj/package.json": "{}", "proj/.npmrc": "registry=https://project.example/\n"},
			cwd:   "proj/src/deep",
			want:  []Source{src("npm", "$D/proj/.npmrc registry", "https://project.example/", "project.example:443", "")},
		},
		{
			name:  "NPM_CONFIG_USERCONFIG names the user's file",
			files: map[string]string{"home/.npmrc": "registry=https://home.example/\n", "cfg/npmrc": "registry=https://userconfig.example/\n"},
			env:   map[string]string{"NPM_CONFIG_USERCONFIG": "$D/cfg/npmrc"},
			want:  []Source{src("npm", "$D/cfg/npmrc registry", "https://userconfig.example/", "userconfig.example:443", "")},
		},
		{
			name:  "the global npmrc next to node: <prefix>/etc/npmrc, the prefix two levels above node",
			files: map[string]string{"usr/etc/npmrc": "registry=https://global.example/\n"},
			want:  []Source{src("npm", "$D/usr/etc/npmrc registry", "https://global.example/", "global.example:443", "")},
		},
		{
			name:  "NPM_CONFIG_PREFIX moves the global npmrc",
			files: map[string]string{"usr/etc/npmrc": "registry=https://global.example/\n", "opt/etc/npmrc": "registry=https://prefix.example/\n"},
			env:   map[string]string{"NPM_CONFIG_PREFIX": "$D/opt"},
			want:  []Source{src("npm", "$D/opt/etc/npmrc registry", "https://prefix.example/", "prefix.example:443", "")},
		},
		{
			name:  "a prefix in the user's file moves the global npmrc",
			files: map[string]string{"home/.npmrc": "prefix=~/.npm-global\n", "home/.npm-global/etc/npmrc": "registry=https://homeprefix.example/\n"},
			want:  []Source{src("npm", "$D/home/.npm-global/etc/npmrc registry", "https://homeprefix.example/", "homeprefix.example:443", "")},
		},
		{
			name:  "the PREFIX variable is the default prefix",
			files: map[string]string{"pfx/etc/npmrc": "registry=https://prefixvar.example/\n"},
			env:   map[string]string{"PREFIX": "$D/pfx"},
			want:  []Source{src("npm", "$D/pfx/etc/npmrc registry", "https://prefixvar.example/", "prefixvar.example:443", "")},
		},
		{
			name: "scoped registries from every layer, the higher winning; the default registry stays",
			files: map[string]string{
				"home/.npmrc":   "@corp:registry=https://user-corp.example/\n@team:registry=https://team.example:8443/\n",
				"usr/etc/npmrc": "@corp:registry=https://global-corp.example/\n@ops:registry=http://ops.example/\n",
			},
			env: map[string]string{"npm_config_@tools:registry": "https://tools.example/"},
			want: []Source{
				npmjs,
				src("npm", "$D/home/.npmrc @corp:registry", "https://user-corp.example/", "user-corp.example:443", ""),
				src("npm", "$D/home/.npmrc @team:registry", "https://team.example:8443/", "team.example:8443", ""),
				src("npm", "$D/usr/etc/npmrc @ops:registry", "http://ops.example/", "ops.example:80", ""),
				src("npm", "npm_config_@tools:registry", "https://tools.example/", "tools.example:443", ""),
			},
		},
		{
			name:  "a registry that is not a URL says so",
			files: map[string]string{"home/.npmrc": "registry=npm.corp.example\n"},
			want:  []Source{src("npm", "$D/home/.npmrc registry", "npm.corp.example", "", `not an http(s) URL (scheme "")`)},
		},
		{
			name:  "a file that cannot be read says so; the others count",
			files: map[string]string{"home/.npmrc/x": "", "usr/etc/npmrc": "registry=https://global.example/\n"},
			want: []Source{
				src("npm", "$D/usr/etc/npmrc registry", "https://global.example/", "global.example:443", ""),
				src("npm", "", "", "", "could not read $D/home/.npmrc, so its settings are not used: read $D/home/.npmrc: is a directory"),
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMachine(t)
			for rel, content := range tc.files {
				m.write(t, rel, content)
			}
			for k, v := range tc.env {
				m.env[k] = strings.ReplaceAll(v, "$D", m.dir)
			}
			if tc.cwd != "" {
				m.cwd = m.path(tc.cwd)
			}
			got := relative(m, npmSources(t.Context(), m.runner()))
			if diff := cmp.Diff(tc.want, got, ruleText); diff != "" {
				t.Errorf("npmSources mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNpmSourcesBuiltin: npm's own npmrc, in the directory of the
// npm-cli.js the npm on PATH links to, is the lowest layer.
func TestNpmSourcesBuiltin(t *testing.T) {
	m := newMachine(t)
	m.write(t, "usr/lib/node_modules/npm/bin/npm-cli.js", "")
	m.write(t, "usr/lib/node_modules/npm/npmrc", "registry=https://builtin.example/\n@b:registry=https://b.example/\n")
	if err := os.Symlink("../lib/node_modules/npm/bin/npm-cli.js", m.path("usr/bin/npm")); err != nil {
		t.Fatal(err)
	}
	want := []Source{
		src("npm", "$D/usr/lib/node_modules/npm/npmrc registry", "https://builtin.example/", "builtin.example:443", ""),
		src("npm", "$D/usr/lib/node_modules/npm/npmrc @b:registry", "https://b.example/", "b.example:443", ""),
	}
	if diff := cmp.Diff(want, relative(m, npmSources(t.Context(), m.runner())), ruleText); diff != "" {
		t.Errorf("npmSources mismatch (-want +got):\n%s", diff)
	}
	m.write(t, "home/.npmrc", "registry=https://user.example/\n")
	want[0] = src("npm", "$D/home/.npmrc registry", "https://user.example/", "user.example:443", "")
	if diff := cmp.Diff(want, relative(m, npmSources(t.Context(), m.runner())), ruleText); diff != "" {
		t.Errorf("with a user's registry, npmSources mismatch (-want +got):\n%s", diff)
	}
}

// TestNpmSourcesAgreeWithNpm runs this machine's npm, the independent
// oracle, on made-up configurations and checks that npmSources reads the
// same registry as `npm config get registry` prints.
func TestNpmSourcesAgreeWithNpm(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not on PATH")
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		env   map[string]string
	}{
		{name: "nothing"},
		{name: "user", files: map[string]string{"home/.npmrc": "registry = 'https://user.example/' # comment\n"}},
		{name: "project over user", files: map[string]string{"home/.npmrc": "registry=https://user.example/\n", "work/package.json": "{}", "work/.npmrc": "registry=\"https://project.example/\"\n"}},
		{name: "env over project", files: map[string]string{"work/node_modules/.keep": "", "work/.npmrc": "registry=https://project.example/\n"}, env: map[string]string{"NPM_CONFIG_REGISTRY": "https://env.example/"}},
		{name: "prefix's global", files: map[string]string{"pfx/etc/npmrc": "registry=https://global.example/\n"}, env: map[string]string{"NPM_CONFIG_PREFIX": "$D/pfx"}},
		{name: "userconfig and ${VAR}", files: map[string]string{"cfg/rc": "registry=https://${REG_HOST}/\n"}, env: map[string]string{"NPM_CONFIG_USERCONFIG": "$D/cfg/rc", "REG_HOST": "var.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMachine(t)
			for rel, content := range tc.files {
				m.write(t, rel, content)
			}
			env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + m.path("home"), "NO_UPDATE_NOTIFIER=1", "npm_config_update_notifier=false"}
			for k, v := range tc.env {
				env = append(env, k+"="+strings.ReplaceAll(v, "$D", m.dir))
			}
			cmd := exec.CommandContext(t.Context(), npm, "config", "get", "registry")
			cmd.Env, cmd.Dir = env, m.cwd
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("npm config get registry: %v", err)
			}
			r := systemRunner
			r.environ = func() []string { return env }
			r.getwd = func() (string, error) { return m.cwd, nil }
			got := npmSources(t.Context(), r)
			if want := strings.TrimSpace(string(out)); len(got) == 0 || got[0].Value != want {
				t.Errorf("npm config get registry printed %s; npmSources read %v", want, got)
			}
		})
	}
}

func TestPipSources(t *testing.T) {
	pypi := []Source{
		src("pip", "default", "https://pypi.org/simple", "pypi.org:443", ""),
		src("pip", "default", "https://files.pythonhosted.org/packages", "files.pythonhosted.org:443", ""),
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		env   map[string]string
		want  []Source
	}{
		{name: "nothing configured: pip's defaults", want: pypi},
		{
			name:  "this machine's kind: a cert, and local find-links from the environment",
			files: map[string]string{"etc/pip.conf": "[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n"},
			env:   map[string]string{"PIP_CERT": "/etc/ssl/certs/ca-certificates.crt", "PIP_FIND_LINKS": "/opt/wheels"},
			want:  append([]Source{src("pip", "PIP_FIND_LINKS", "/opt/wheels", "", "a local path names no host")}, pypi...),
		},
		{
			name: "index-url replaces the defaults; extra-index-url adds; one index for every command",
			files: map[string]string{"etc/pip.conf": "[global]\nindex-url = https://pypi.corp.example/simple\n" +
				"extra-index-url =\n    https://extra1.example/simple\n    https://extra2.example:8443/simple\n"},
			want: []Source{
				src("pip", "$D/etc/pip.conf global.index-url", "https://pypi.corp.example/simple", "pypi.corp.example:443", ""),
				src("pip", "$D/etc/pip.conf global.extra-index-url", "https://extra1.example/simple", "extra1.example:443", ""),
				src("pip", "$D/etc/pip.conf global.extra-index-url", "https://extra2.example:8443/simple", "extra2.example:8443", ""),
			},
		},
		{
			name:  "[install]'s index-url: pip download and pip wheel still use pypi",
			files: map[string]string{"etc/xdg/pip/pip.conf": "[install]\nindex_url: https://install.example/simple\n"},
			env:   map[string]string{"XDG_CONFIG_DIRS": "$D/etc/xdg"},
			want:  append([]Source{src("pip", "$D/etc/xdg/pip/pip.conf install.index-url", "https://install.example/simple", "install.example:443", "")}, pypi...),
		},
		{
			name: "each command's section over [global]",
			files: map[string]string{"home/.config/pip/pip.conf": "[global]\nindex-url = https://global.example/simple\n" +
				"[download]\nindex-url = https://download.example/simple\n[wheel]\nfind-links = http://wheels.example/\n"},
			want: []Source{
				src("pip", "$D/home/.config/pip/pip.conf global.index-url", "https://global.example/simple", "global.example:443", ""),
				src("pip", "$D/home/.config/pip/pip.conf download.index-url", "https://download.example/simple", "download.example:443", ""),
				src("pip", "$D/home/.config/pip/pip.conf wheel.find-links", "http://wheels.example/", "wheels.example:80", ""),
			},
		},
		{
			name: "a later file overrides a key: /etc, ~/.pip, ~/.config/pip ($XDG_CONFIG_HOME), the venv's",
			files: map[string]string{
				"etc/pip.conf":              "[global]\nindex-url = https://etc.example/simple\nextra-index-url = https://etc-extra.example/\nfind-links = https://etc-links.example/\n",
				"home/.pip/pip.conf":        "[global]\nindex-url = https://legacy.example/simple\nextra-index-url = https://legacy-extra.example/\n",
				"xdghome/pip/pip.conf":      "[global]\nindex-url = https://xdg.example/simple\n",
				"venv/pip.conf":             "[global]\nindex-url = https://venv.example/simple\n",
				"home/.config/pip/pip.conf": "[global]\nindex-url = https://not-read.example/\n",
			},
			env: map[string]string{"XDG_CONFIG_HOME": "$D/xdghome", "VIRTUAL_ENV": "$D/venv"},
			want: []Source{
				src("pip", "$D/venv/pip.conf global.index-url", "https://venv.example/simple", "venv.example:443", ""),
				src("pip", "$D/home/.pip/pip.conf global.extra-index-url", "https://legacy-extra.example/", "legacy-extra.example:443", ""),
				src("pip", "$D/etc/pip.conf global.find-links", "https://etc-links.example/", "etc-links.example:443", ""),
			},
		},
		{
			name: "PIP_CONFIG_FILE comes last, and leaves the user's files out",
			files: map[string]string{
				"etc/pip.conf":       "[global]\nextra-index-url = https://etc-extra.example/\n",
				"home/.pip/pip.conf": "[global]\nfind-links = https://user-links.example/\n",
				"cfg/pip.ini":        "[global]\nindex-url = https://envfile.example/simple\n",
			},
			env: map[string]string{"PIP_CONFIG_FILE": "$D/cfg/pip.ini"},
			want: []Source{
				src("pip", "$D/cfg/pip.ini global.index-url", "https://envfile.example/simple", "envfile.example:443", ""),
				src("pip", "$D/etc/pip.conf global.extra-index-url", "https://etc-extra.example/", "etc-extra.example:443", ""),
			},
		},
		{
			name:  "PIP_CONFIG_FILE=/dev/null reads no file",
			files: map[string]string{"etc/pip.conf": "[global]\nindex-url = https://etc.example/simple\n"},
			env:   map[string]string{"PIP_CONFIG_FILE": os.DevNull},
			want:  pypi,
		},
		{
			name:  "environment variables over the files",
			files: map[string]string{"etc/pip.conf": "[global]\nindex-url = https://etc.example/simple\n[install]\nextra-index-url = https://etc-extra.example/\n"},
			env:   map[string]string{"PIP_INDEX_URL": "https://env.example/simple", "PIP_EXTRA_INDEX_URL": "http://e1.example:8080/ https://e2.example/"},
			want: []Source{
				src("pip", "PIP_INDEX_URL", "https://env.example/simple", "env.example:443", ""),
				src("pip", "PIP_EXTRA_INDEX_URL", "http://e1.example:8080/", "e1.example:8080", ""),
				src("pip", "PIP_EXTRA_INDEX_URL", "https://e2.example/", "e2.example:443", ""),
			},
		},
		{
			name:  "an empty variable is no setting",
			files: map[string]string{"etc/pip.conf": "[global]\nindex-url = https://etc.example/simple\n"},
			env:   map[string]string{"PIP_INDEX_URL": ""},
			want:  []Source{src("pip", "$D/etc/pip.conf global.index-url", "https://etc.example/simple", "etc.example:443", "")},
		},
		{name: "no-index: no defaults", files: map[string]string{"etc/pip.conf": "[global]\nno-index = yes\n"}, want: nil},
		{name: "PIP_NO_INDEX", env: map[string]string{"PIP_NO_INDEX": "1"}, want: nil},
		{
			name:  "[DEFAULT] reaches every section there is (not [download], so pypi stays); comments; continuation after a blank line",
			files: map[string]string{"etc/pip.conf": "# pip\n[DEFAULT]\nindex-url = https://default.example/simple\n[install]\n; nothing\nextra-index-url = https://a.example/\n\n  https://b.example/\n"},
			want: []Source{
				src("pip", "$D/etc/pip.conf install.index-url", "https://default.example/simple", "default.example:443", ""),
				src("pip", "$D/etc/pip.conf install.extra-index-url", "https://a.example/", "a.example:443", ""),
				src("pip", "$D/etc/pip.conf install.extra-index-url", "https://b.example/", "b.example:443", ""),
				pypi[0], pypi[1],
			},
		},
		{
			name: "a file configparser refuses says so and is left out; the others count",
			files: map[string]string{
				"etc/pip.conf":       "index-url = https://no-section.example/simple\n",
				"home/.pip/pip.conf": "[global]\nextra-index-url = https://user.example/\n",
			},
			want: append([]Source{
				src("pip", "$D/home/.pip/pip.conf global.extra-index-url", "https://user.example/", "user.example:443", ""),
			}, append(pypi, src("pip", "", "", "", `$D/etc/pip.conf: line 1: "index-url = https://no-section.example/simple" is before any [section]; pip refuses to run until it is fixed, so its settings are not used`))...),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMachine(t)
			for rel, content := range tc.files {
				m.write(t, rel, content)
			}
			for k, v := range tc.env {
				m.env[k] = strings.ReplaceAll(v, "$D", m.dir)
			}
			got := relative(m, pipSources(t.Context(), m.runner()))
			if diff := cmp.Diff(tc.want, got, ruleText); diff != "" {
				t.Errorf("pipSources mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPipSourcesVenvOnPath: the pip on PATH in a virtual environment
// that is not activated still reads that environment's pip.conf.
func TestPipSourcesVenvOnPath(t *testing.T) {
	m := newMachine(t)
	m.write(t, "venv/pyvenv.cfg", "home = /usr/bin\n")
	m.write(t, "venv/pip.conf", "[global]\nindex-url = https://venv.example/simple\n")
	m.tools["pip"] = m.path("venv/bin/pip")
	want := []Source{src("pip", "$D/venv/pip.conf global.index-url", "https://venv.example/simple", "venv.example:443", "")}
	if diff := cmp.Diff(want, relative(m, pipSources(t.Context(), m.runner())), ruleText); diff != "" {
		t.Errorf("pipSources mismatch (-want +got):\n%s", diff)
	}
}

func TestParsePipConf(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     map[string]map[string]string
		err      string
	}{
		{
			name: "keys lower-cased, either delimiter, values trimmed, a URL's colon kept",
			in:   "[global]\nIndex-URL : https://x.example:8443/simple  \ntimeout=60\n",
			want: map[string]map[string]string{"global": {"index-url": "https://x.example:8443/simple", "timeout": "60"}},
		},
		{
			name: "continuation lines and blank lines inside; trailing blank lines dropped",
			in:   "[global]\n  extra-index-url = a\n      b\n\n      c\n\n\n  find-links = d\n",
			want: map[string]map[string]string{"global": {"extra-index-url": "a\nb\n\nc", "find-links": "d"}},
		},
		{name: "a key before any section", in: "index-url = x\n", err: `line 1: "index-url = x" is before any [section]`},
		{name: "a duplicate section", in: "[global]\n[global]\n", err: "line 2: section [global] appears twice"},
		{name: "a duplicate key", in: "[global]\na = 1\nA = 2\n", err: `line 3: key "a" appears twice in its section`},
		{name: "a line that is no key = value", in: "[global]\njust words\n", err: `line 2: "just words" is no key = value`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parsePipConf(tc.in)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("parsePipConf: error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parsePipConf mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPipSourcesAgreeWithPip runs this machine's pip, the independent
// oracle, on made-up configuration files and checks that every
// index-url, extra-index-url and find-links `pip config list` reports
// for [global] and [install] is what pipSources read, from the same file.
func TestPipSourcesAgreeWithPip(t *testing.T) {
	pip, err := exec.LookPath("pip")
	if err != nil {
		t.Skip("pip is not on PATH")
	}
	m := newMachine(t)
	m.write(t, "home/.pip/pip.conf", "[global]\nindex-url = https://legacy.example/simple\nfind-links = https://links.example/\n")
	m.write(t, "home/.config/pip/pip.conf", "[global]\nindex_url = https://user.example/simple\n[install]\nextra-index-url =\n  https://e1.example/\n  https://e2.example/\n")
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + m.path("home"), "XDG_CONFIG_DIRS=" + m.path("xdg"), "PIP_DISABLE_PIP_VERSION_CHECK=1"}
	if v := os.Getenv("PYENV_ROOT"); v != "" {
		env = append(env, "PYENV_ROOT="+v)
	}
	cmd := exec.CommandContext(t.Context(), pip, "config", "list")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("pip config list: %v", err)
	}
	want := map[string]string{}
	for line := range strings.Lines(string(out)) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		section, key, _ := strings.Cut(k, ".")
		if ok && (section == "global" || section == "install") && slices.Contains(pipURLKeys, key) {
			// pip prints a value's newlines as \n.
			want[k] = strings.Join(strings.Fields(strings.ReplaceAll(strings.Trim(v, "'\""), `\n`, " ")), " ")
		}
	}
	if len(want) == 0 {
		t.Fatalf("pip config list printed nothing of the files:\n%s", out)
	}
	r := m.runner()
	r.environ = func() []string { return env }
	got := map[string]string{}
	for _, s := range pipSources(t.Context(), r) {
		if file, key, ok := strings.Cut(s.Setting, " "); ok && strings.HasPrefix(file, m.dir) {
			got[key] = strings.TrimSpace(got[key] + " " + s.Value)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pip config list against pipSources mismatch (-want +got):\n%s", diff)
	}
}

// TestRegistriesMissingTools: a tool that is not installed, or fails, is
// skipped and said so; the others still count.
func TestRegistriesMissingTools(t *testing.T) {
	m := newMachine(t)
	delete(m.tools, "npm")
	delete(m.tools, "pip")
	m.tools["go"], m.tools["pip3"] = "/fake/go", m.path("usr/bin/pip3")
	m.write(t, "etc/pip.conf", "[global]\n[global]\n")
	r := m.runner()
	r.run = func(ctx context.Context, path string, env []string, args ...string) ([]byte, error) {
		if path == "/fake/go" {
			return []byte("https://proxy.golang.org,direct\nsum.golang.org\n"), nil
		}
		return nil, errors.New("exit status 1: broken")
	}
	rules, found := registries(t.Context(), r)
	wantRules := []Rule{rule("proxy.golang.org:443"), rule("sum.golang.org:443"), rule("pypi.org:443"), rule("files.pythonhosted.org:443")}
	if diff := cmp.Diff(wantRules, rules, ruleText); diff != "" {
		t.Errorf("rules mismatch (-want +got):\n%s", diff)
	}
	wantFound := []Source{
		{Tool: "go", Setting: "GOPROXY", Value: "https://proxy.golang.org", Rule: rule("proxy.golang.org:443")},
		{Tool: "go", Setting: "GOPROXY", Value: "direct", Note: "direct: modules are fetched from their own origin hosts, which are not listed"},
		{Tool: "go", Setting: "GOSUMDB", Value: "sum.golang.org", Rule: rule("sum.golang.org:443")},
		{Tool: "npm", Note: "npm is not installed (not on PATH)"},
		{Tool: "pip", Setting: "default", Value: "https://pypi.org/simple", Rule: rule("pypi.org:443")},
		{Tool: "pip", Setting: "default", Value: "https://files.pythonhosted.org/packages", Rule: rule("files.pythonhosted.org:443")},
		{Tool: "pip", Note: "$D/etc/pip.conf: line 2: section [global] appears twice; pip refuses to run until it is fixed, so its settings are not used"},
	}
	if diff := cmp.Diff(wantFound, relative(m, found), ruleText); diff != "" {
		t.Errorf("sources mismatch (-want +got):\n%s", diff)
	}
	b, err := json.Marshal(found[2:4])
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `[{"tool":"go","setting":"GOSUMDB","value":"sum.golang.org","rule":"sum.golang.org:443"},{"tool":"npm","note":"npm is not installed (not on PATH)"}]`; got != want {
		t.Errorf("JSON = %s\nwant   %s", got, want)
	}
}

// TestRegistriesRealGoEnv runs the real tools of this machine and checks
// that the host of `go env GOPROXY`, read here at run time, is found.
func TestRegistriesRealGoEnv(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	out, err := exec.Command(gobin, "env", "GOPROXY").Output()
	if err != nil {
		t.Fatal(err)
	}
	var want []Rule
	for _, s := range parseGOPROXY(strings.TrimSpace(string(out))) {
		if s.Rule != (Rule{}) {
			want = append(want, s.Rule)
		}
	}
	if len(want) == 0 {
		t.Skipf("GOPROXY=%s names no host", strings.TrimSpace(string(out)))
	}
	rules, found := Registries(t.Context())
	for _, w := range want {
		if !containsRule(rules, w) {
			t.Errorf("Registries found %v, without %s from GOPROXY", rules, w)
		}
	}
	for _, s := range found {
		t.Logf("%s", s)
	}
}

// BenchmarkRegistries reads this machine's registries as the server does
// at its start.
func BenchmarkRegistries(b *testing.B) {
	for b.Loop() {
		Registries(b.Context())
	}
}
