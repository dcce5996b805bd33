package snapshot

import (
	"strings"
	"unicode/utf8"
)

// matcher holds exclude patterns in gitignore syntax. A path is excluded when
// the last pattern that matches it is not a negation. The walk never enters
// an excluded directory, so, as in git, nothing beneath one can be
// re-included.
type matcher struct {
	pats []ignorePattern
}

type ignorePattern struct {
	neg     bool     // "!pattern"
	dirOnly bool     // "pattern/"
	segs    []string // the pattern's components; "**" matches any number
}

// compileIgnore parses patterns, one per string, in gitignore syntax:
//
//   - blank strings and those starting "#" are ignored ("\#" is a literal #);
//   - "!" negates ("\!" is a literal !);
//   - a trailing "/" matches directories only;
//   - a pattern with a "/" elsewhere is anchored at the root (a leading "/"
//     only anchors), one without matches a name at any depth;
//   - "*" matches anything but "/", "?" one character, "[a-z]" and "[!a-z]"
//     (or "[^a-z]") a class, "\" escapes; "**" as a whole component matches
//     any number of components ("a/**" everything inside a, not a itself);
//   - trailing spaces are dropped unless escaped.
func compileIgnore(lines []string) *matcher {
	m := &matcher{}
	for _, line := range lines {
		if p, ok := parseIgnore(line); ok {
			m.pats = append(m.pats, p)
		}
	}
	return m
}

func parseIgnore(line string) (ignorePattern, bool) {
	var p ignorePattern
	line = strings.TrimRight(line, "\r\n")
	// Trailing spaces go unless escaped.
	for strings.HasSuffix(line, " ") && !strings.HasSuffix(line, "\\ ") {
		line = line[:len(line)-1]
	}
	if line == "" || line[0] == '#' {
		return p, false
	}
	if line[0] == '!' {
		p.neg = true
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") {
		p.dirOnly = true
		line = strings.TrimRight(line, "/")
	}
	if line == "" {
		return p, false
	}
	anchored := strings.Contains(line, "/")
	line = strings.TrimPrefix(line, "/")
	if !anchored {
		p.segs = []string{"**", line}
	} else {
		for _, s := range strings.Split(line, "/") {
			if s == "" {
				continue
			}
			if s == "**" && len(p.segs) > 0 && p.segs[len(p.segs)-1] == "**" {
				continue
			}
			p.segs = append(p.segs, s)
		}
	}
	return p, len(p.segs) > 0
}

// match reports whether rel (slash-separated, relative to the root) is
// excluded; isDir says whether it is a directory.
func (m *matcher) match(rel string, isDir bool) bool {
	if m == nil || len(m.pats) == 0 {
		return false
	}
	parts := strings.Split(rel, "/")
	excluded := false
	for i := range m.pats {
		p := &m.pats[i]
		if p.dirOnly && !isDir {
			continue
		}
		if p.neg == !excluded {
			continue // cannot change the answer
		}
		if matchSegs(p.segs, parts) {
			excluded = !p.neg
		}
	}
	return excluded
}

// matchSegs matches path components against pattern components.
func matchSegs(p, s []string) bool {
	for len(p) > 0 {
		if p[0] == "**" {
			if len(p) == 1 {
				return len(s) >= 1
			}
			for i := 0; i <= len(s); i++ {
				if matchSegs(p[1:], s[i:]) {
					return true
				}
			}
			return false
		}
		if len(s) == 0 || !matchSeg(p[0], s[0]) {
			return false
		}
		p, s = p[1:], s[1:]
	}
	return len(s) == 0
}

// matchSeg matches one component against one glob component: *, ?, [...]
// and \ escapes.
func matchSeg(pat, name string) bool {
	// Backtracking over the last star, as in path.Match.
	px, nx := 0, 0
	starP, starN := -1, -1
	for nx < len(name) || px < len(pat) {
		if px < len(pat) {
			switch c := pat[px]; c {
			case '*':
				for px < len(pat) && pat[px] == '*' {
					px++
				}
				starP, starN = px, nx
				continue
			case '?':
				if nx < len(name) {
					_, w := utf8.DecodeRuneInString(name[nx:])
					px++
					nx += w
					continue
				}
			case '[':
				if nx < len(name) {
					r, w := utf8.DecodeRuneInString(name[nx:])
					if ok, end, valid := matchClass(pat[px:], r); valid {
						if ok {
							px += end
							nx += w
							continue
						}
						break
					}
				}
				// An unclosed '[' is a literal.
				if nx < len(name) && name[nx] == '[' {
					px++
					nx++
					continue
				}
			case '\\':
				if px+1 < len(pat) {
					if nx < len(name) && name[nx] == pat[px+1] {
						px += 2
						nx++
						continue
					}
					break
				}
				fallthrough
			default:
				if nx < len(name) && name[nx] == c {
					px++
					nx++
					continue
				}
			}
		}
		if starP >= 0 && starN < len(name) {
			_, w := utf8.DecodeRuneInString(name[starN:])
			starN += w
			px, nx = starP, starN
			continue
		}
		return false
	}
	return true
}

// matchClass matches r against the class at the start of pat ("[...]"). It
// returns whether r matched, the class's length, and whether it was a
// well-formed class.
func matchClass(pat string, r rune) (matched bool, end int, valid bool) {
	i := 1
	neg := false
	if i < len(pat) && (pat[i] == '!' || pat[i] == '^') {
		neg = true
		i++
	}
	first := true
	for i < len(pat) {
		if pat[i] == ']' && !first {
			return matched != neg, i + 1, true
		}
		first = false
		lo, w := classChar(pat, i)
		if w == 0 {
			return false, 0, false
		}
		i += w
		hi := lo
		if i+1 < len(pat) && pat[i] == '-' && pat[i+1] != ']' {
			hi, w = classChar(pat, i+1)
			if w == 0 {
				return false, 0, false
			}
			i += 1 + w
		}
		if lo <= r && r <= hi {
			matched = true
		}
	}
	return false, 0, false
}

func classChar(pat string, i int) (rune, int) {
	if pat[i] == '\\' {
		if i+1 >= len(pat) {
			return 0, 0
		}
		r, w := utf8.DecodeRuneInString(pat[i+1:])
		return r, w + 1
	}
	r, w := utf8.DecodeRuneInString(pat[i:])
	return r, w
}
