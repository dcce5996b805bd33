package snapshot

import "testing"

func TestIgnore(t *testing.T) {
	for _, tc := range []struct {
		pats  []string
		path  string
		isDir bool
		want  bool
	}{
		{[]string{"*.log"}, "a.log", false, true},
		{[]string{"*.log"}, "deep/down/a.log", false, true},
		{[]string{"*.log"}, "a.log.txt", false, false},
		{[]string{"*.log", "!keep.log"}, "keep.log", false, false},
		{[]string{"*.log", "!keep.log"}, "x/keep.log", false, false},
		{[]string{"!keep.log", "*.log"}, "keep.log", false, true}, // the last match wins
		{[]string{"build/"}, "build", true, true},
		{[]string{"build/"}, "build", false, false}, // a file named build
		{[]string{"build/"}, "src/build", true, true},
		{[]string{"/build"}, "build", false, true},
		{[]string{"/build"}, "src/build", true, false},
		{[]string{"src/gen"}, "src/gen", true, true},
		{[]string{"src/gen"}, "x/src/gen", true, false},
		{[]string{"src/**/gen"}, "src/gen", true, true},
		{[]string{"src/**/gen"}, "src/a/b/gen", true, true},
		{[]string{"**/gen"}, "gen", true, true},
		{[]string{"**/gen"}, "a/gen", true, true},
		{[]string{"a/**"}, "a", true, false},
		{[]string{"a/**"}, "a/b", false, true},
		{[]string{"a/**/"}, "a/b", false, false},
		{[]string{"a/**/"}, "a/b", true, true},
		{[]string{"?.txt"}, "a.txt", false, true},
		{[]string{"?.txt"}, "ab.txt", false, false},
		{[]string{"?.txt"}, "ü.txt", false, true},
		{[]string{"[a-c].txt"}, "b.txt", false, true},
		{[]string{"[a-c].txt"}, "d.txt", false, false},
		{[]string{"[!a-c].txt"}, "d.txt", false, true},
		{[]string{"[^a-c].txt"}, "a.txt", false, false},
		{[]string{"[].txt"}, "].txt", false, false},
		{[]string{"[]].txt"}, "].txt", false, true},
		{[]string{"[unclosed"}, "[unclosed", false, true},
		{[]string{`\!important`}, "!important", false, true},
		{[]string{`\#hash`}, "#hash", false, true},
		{[]string{"#comment"}, "#comment", false, false},
		{[]string{`\*`}, "*", false, true},
		{[]string{`\*`}, "x", false, false},
		{[]string{"trailing  "}, "trailing", false, true},
		{[]string{`space\ `}, "space ", false, true},
		{[]string{"*"}, "anything/at/all", false, true},
		{[]string{"a*b*c"}, "aXXbYYc", false, true},
		{[]string{"a*b*c"}, "aXXbYY", false, false},
		{[]string{"*.go"}, "with space.go", false, true},
		{[]string{"new\nline"}, "new", false, false},
		{[]string{""}, "x", false, false},
		{[]string{"/"}, "x", false, false},
	} {
		if got := compileIgnore(tc.pats).match(tc.path, tc.isDir); got != tc.want {
			t.Errorf("%q matching %q (dir %v): %v, want %v", tc.pats, tc.path, tc.isDir, got, tc.want)
		}
	}
}
