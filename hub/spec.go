package hub

import (
	"errors"
	"fmt"
	"strings"
)

// Spec is one destination of the command line.
type Spec struct {
	// Name names the destination; handle ids from it start with Name+"/".
	Name string
	// Argv is the command that reaches the far toolhost's stdio.
	Argv []string
}

// validName reports whether name may name a destination: it prefixes ids,
// so no slash; ^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$, checked by hand: that
// regexp, compiled when the package was initialized, was a tenth of the
// process's start-up (its {0,63} compiles to 63 copies of the class).
func validName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// ParseSpec parses NAME=ARGV. ARGV is split into words as a POSIX shell
// splits them — blanks separate words, single quotes keep everything,
// double quotes keep all but \" \\ \$ \`, a backslash quotes the next
// character — but nothing is expanded and no shell is run.
func ParseSpec(s string) (Spec, error) {
	name, cmd, ok := strings.Cut(s, "=")
	if !ok {
		return Spec{}, fmt.Errorf("destination %q: want NAME=COMMAND", s)
	}
	if !validName(name) {
		return Spec{}, fmt.Errorf("destination %q: the name must be letters, digits, '_', '.' or '-' (at most 64), starting with a letter or digit", name)
	}
	argv, err := splitWords(cmd)
	if err != nil {
		return Spec{}, fmt.Errorf("destination %q: %w", name, err)
	}
	if len(argv) == 0 {
		return Spec{}, fmt.Errorf("destination %q: no command", name)
	}
	return Spec{Name: name, Argv: argv}, nil
}

// errUnterminated says a quote was not closed.
var errUnterminated = errors.New("unterminated quote")

// splitWords splits s into words as a shell would, without expanding
// anything.
func splitWords(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		in    bool // a word has begun (an empty quoted word counts)
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case c == '\\':
			in = true
			if i+1 < len(s) {
				i++
				if s[i] != '\n' {
					cur.WriteByte(s[i])
				}
			}
		case c == '\'':
			in = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errUnterminated
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			in = true
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errUnterminated
			}
		default:
			in = true
			cur.WriteByte(c)
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}
