package netproxy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// pipCommands are the pip commands that fetch packages, whose settings
// pipSources reads: a [section] of each overrides [global].
var pipCommands = []string{"install", "download", "wheel"}

// pipURLKeys are the settings that name where pip fetches from.
var pipURLKeys = []string{"index-url", "extra-index-url", "find-links"}

// pipDefaults are the hosts of pip's built-in index.
var pipDefaults = []string{"https://pypi.org/simple", "https://files.pythonhosted.org/packages"}

// pipValue is a setting's value and where it was set, for Source.Setting.
type pipValue struct {
	value, setting string
}

// pipSources reads the indexes pip would fetch from, as pip reads its
// configuration, without running pip (`pip config list` can take seconds
// on a loaded machine). For each of `pip install`, `pip download` and
// `pip wheel`, a setting (index-url, extra-index-url, find-links,
// no-index) comes from, the first that sets it:
//
//   - its environment variable: PIP_INDEX_URL, PIP_EXTRA_INDEX_URL,
//     PIP_FIND_LINKS, PIP_NO_INDEX;
//   - the command's [install], [download] or [wheel] section of the
//     configuration files;
//   - their [global] section.
//
// The configuration files, each overriding a key of the ones before:
// pip/pip.conf in each directory of XDG_CONFIG_DIRS (/etc/xdg), then
// /etc/pip.conf; the user's ~/.pip/pip.conf, then
// $XDG_CONFIG_HOME/pip/pip.conf (~/.config/pip/pip.conf), both left out
// when the file PIP_CONFIG_FILE names exists; the site's pip.conf in
// $VIRTUAL_ENV, else in the virtual environment the pip on PATH belongs
// to (a system Python's prefix, which only Python knows, is not read);
// and last the file PIP_CONFIG_FILE names. PIP_CONFIG_FILE=/dev/null
// reads none.
//
// The files are ini as Python's configparser reads them ("=" or ":",
// "#" and ";" comments, indented continuation lines; keys in any case,
// "_" read as "-"). A file configparser refuses (a key before any
// [section], a duplicate section or key, a line it cannot read) gives a
// Source saying so and is left out: pip refuses to run until it is
// fixed. A value that is a local path gives a Source saying it names no
// host. When a command names no index-url and no-index is not true,
// pip's defaults, pypi.org and files.pythonhosted.org, are added.
func pipSources(_ context.Context, r runner) []Source {
	bin, err := r.lookPath("pip")
	if err != nil {
		bin, err = r.lookPath("pip3")
	}
	if err != nil {
		return []Source{{Tool: "pip", Note: "pip is not installed (neither pip nor pip3 on PATH)"}}
	}
	environ := r.environ()
	env := envMap(environ)
	var notes []Source
	note := func(msg string) { notes = append(notes, Source{Tool: "pip", Note: msg}) }

	files := map[string]pipValue{} // "section.key" of the files, a later file winning
	for _, file := range pipFiles(r, env, bin, note) {
		b, msg := readConfig(file)
		if msg != "" {
			note(msg)
		}
		if b == nil {
			continue
		}
		sections, err := parsePipConf(string(b))
		if err != nil {
			note(fmt.Sprintf("%s: %v; pip refuses to run until it is fixed, so its settings are not used", file, err))
			continue
		}
		for sec, kv := range sections {
			for k, v := range kv {
				key := sec + "." + pipKey(k)
				files[key] = pipValue{value: v, setting: file + " " + key}
			}
		}
	}
	vars := map[string]pipValue{} // pip's environment variables, by key
	for _, kv := range environ {
		name, v, ok := strings.Cut(kv, "=")
		if rest, isPip := strings.CutPrefix(name, "PIP_"); ok && isPip {
			vars[pipKey(rest)] = pipValue{value: v, setting: name}
		}
	}
	// get returns the setting command cmd would use; pip ignores an empty
	// value.
	get := func(cmd, key string) (pipValue, bool) {
		for _, v := range []pipValue{vars[key], files[cmd+"."+key], files["global."+key]} {
			if v.value != "" {
				return v, true
			}
		}
		return pipValue{}, false
	}

	var srcs []Source
	seen := map[pipValue]bool{}
	defaults := false
	for _, cmd := range pipCommands {
		for _, key := range pipURLKeys {
			v, ok := get(cmd, key)
			if !ok || seen[v] {
				continue
			}
			seen[v] = true
			for _, u := range strings.Fields(v.value) {
				s := Source{Tool: "pip", Setting: v.setting, Value: u}
				if strings.Contains(u, "://") {
					s.Rule, s.Note = urlRule(u)
				} else {
					s.Note = "a local path names no host"
				}
				srcs = append(srcs, s)
			}
		}
		_, indexNamed := get(cmd, "index-url")
		noIndex, _ := get(cmd, "no-index")
		if !indexNamed && !pipTrue(noIndex.value) {
			defaults = true
		}
	}
	if defaults {
		for _, u := range pipDefaults {
			s := Source{Tool: "pip", Setting: "default", Value: u}
			s.Rule, s.Note = urlRule(u)
			srcs = append(srcs, s)
		}
	}
	return append(srcs, notes...)
}

// pipFiles returns pip's configuration files in the order pip reads
// them, each overriding the ones before; see pipSources.
func pipFiles(r runner, env map[string]string, bin string, note func(string)) []string {
	envFile, envSet := env["PIP_CONFIG_FILE"]
	if envSet && envFile == os.DevNull {
		return nil
	}
	var files []string
	dirs := env["XDG_CONFIG_DIRS"]
	if strings.TrimSpace(dirs) == "" {
		dirs = "/etc/xdg"
	}
	for _, d := range filepath.SplitList(dirs) {
		files = append(files, filepath.Join(d, "pip", "pip.conf"))
	}
	files = append(files, filepath.Join(r.etc, "pip.conf"))
	home := env["HOME"]
	switch {
	case envFile != "" && exists(envFile):
		// pip leaves the user's files out.
	case home == "":
		note("HOME is not set, so the user's pip.conf is not read")
	default:
		files = append(files, filepath.Join(home, ".pip", "pip.conf"))
		xdg := env["XDG_CONFIG_HOME"]
		if strings.TrimSpace(xdg) == "" {
			xdg = filepath.Join(home, ".config")
		}
		files = append(files, filepath.Join(xdg, "pip", "pip.conf"))
	}
	if venv := env["VIRTUAL_ENV"]; venv != "" {
		files = append(files, filepath.Join(venv, "pip.conf"))
	} else if prefix := filepath.Dir(filepath.Dir(bin)); filepath.Base(filepath.Dir(bin)) == "bin" && exists(filepath.Join(prefix, "pyvenv.cfg")) {
		files = append(files, filepath.Join(prefix, "pip.conf"))
	}
	if envFile != "" {
		files = append(files, envFile)
	}
	return files
}

// pipKey returns a setting's name as pip compares it: lower case, "_"
// read as "-", without a leading "--".
func pipKey(k string) string {
	k = strings.ReplaceAll(strings.ToLower(k), "_", "-")
	return strings.TrimPrefix(k, "--")
}

// pipTrue says whether pip reads v as true, as its strtobool does.
func pipTrue(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "y", "yes", "t", "true", "on", "1":
		return true
	}
	return false
}

var (
	// pipSectionRE and pipOptionRE are configparser's SECTCRE and OPTCRE.
	pipSectionRE = regexp.MustCompile(`^\[(.+)\]`)
	pipOptionRE  = regexp.MustCompile(`^(.*?)\s*[=:]\s*(.*)$`)
)

// parsePipConf reads an ini file as Python's configparser.RawConfigParser
// (pip's) does: sections of key = value (or key: value) lines, keys
// lower-cased, "#" and ";" comment lines, a line indented deeper than its
// key's continuing the value (joined with newlines, blank lines kept
// inside), [DEFAULT]'s keys given to every section. Like configparser, it
// fails on a key before any section, a duplicate section or key in the
// file, and a line that is none of these.
func parsePipConf(data string) (map[string]map[string]string, error) {
	sections := map[string]map[string]string{}
	var (
		cur    map[string]string
		opt    string // the key whose value may continue, or ""
		indent int    // the indentation of the last key or section line
	)
	for i, line := range strings.Split(strings.ReplaceAll(data, "\r\n", "\n"), "\n") {
		n := i + 1
		t := strings.TrimSpace(line)
		if t == "" {
			if cur != nil && opt != "" {
				cur[opt] += "\n"
			}
			continue
		}
		if t[0] == '#' || t[0] == ';' {
			continue
		}
		ind := len(line) - len(strings.TrimLeft(line, " \t\f\v"))
		if cur != nil && opt != "" && ind > indent {
			cur[opt] += "\n" + t
			continue
		}
		indent = ind
		if m := pipSectionRE.FindStringSubmatch(t); m != nil {
			if _, dup := sections[m[1]]; dup {
				return nil, fmt.Errorf("line %d: section [%s] appears twice", n, m[1])
			}
			cur, opt = map[string]string{}, ""
			sections[m[1]] = cur
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("line %d: %q is before any [section]", n, t)
		}
		m := pipOptionRE.FindStringSubmatch(t)
		key := ""
		if m != nil {
			key = strings.ToLower(strings.TrimRight(m[1], " \t"))
		}
		if key == "" {
			return nil, fmt.Errorf("line %d: %q is no key = value", n, t)
		}
		if _, dup := cur[key]; dup {
			return nil, fmt.Errorf("line %d: key %q appears twice in its section", n, key)
		}
		cur[key], opt = m[2], key
	}
	defaults := sections["DEFAULT"]
	delete(sections, "DEFAULT")
	for _, kv := range sections {
		for k, v := range defaults {
			if _, ok := kv[k]; !ok {
				kv[k] = v
			}
		}
		for k, v := range kv {
			kv[k] = strings.TrimRightFunc(v, func(r rune) bool { return r == '\n' || r == ' ' || r == '\t' })
		}
	}
	return sections, nil
}
