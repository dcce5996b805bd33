package daemontest

import (
	"strconv"
	"strings"
	"testing"
)

// TestLogTail keeps the last keep bytes and marks what it dropped.
func TestLogTail(t *testing.T) {
	l := tailLog{keep: 2000}
	for i := range 1000 {
		l.add("line " + strconv.Itoa(i))
	}
	got := l.tail()
	if !strings.HasPrefix(got, "…") || !strings.HasSuffix(got, "line 999\n") || len(got) != len("…")+2000 {
		t.Errorf("tail of 1000 lines: %d bytes, %q…%q", len(got), got[:20], got[len(got)-20:])
	}
	short := tailLog{keep: 2000}
	short.add("one")
	if got := short.tail(); got != "one\n" {
		t.Errorf("tail of one line: %q", got)
	}
}
