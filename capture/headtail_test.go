package capture

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func notice(n int, path string) string {
	return "… [" + strconv.Itoa(n) + " bytes omitted; full output in " + path + "] …\n"
}

func TestHeadTailText(t *testing.T) {
	const path = "/abs/stdout.log"
	tests := []struct {
		name          string
		limit         int
		writes        []string
		want          string
		wantTruncated bool
	}{
		{"empty", 8, nil, "", false},
		{"under limit", 8, []string{"abc"}, "abc", false},
		{"exactly limit in pieces", 8, []string{"abcd", "efgh"}, "abcdefgh", false},
		{"one byte over", 8, []string{"abcdefghi"}, "abcd\n" + notice(1, path) + "fghi", true},
		{"many small writes wrap the ring", 8, []string{"ab", "cd", "ef", "gh", "ij", "kl", "m"},
			"abcd\n" + notice(5, path) + "jklm", true},
		{"head ends with newline", 8, []string{"abc\n", "0123456789", "wxyz"}, "abc\n" + notice(10, path) + "wxyz", true},
		{"huge single write", 4, []string{strings.Repeat("x", 1000) + "yz"}, "xx\n" + notice(998, path) + "yz", true},
		{"rune split kept whole when not truncated", 8, []string{"ab\xc3", "\xa9cdef"}, "abécdef", false},
		// "é" is 2 bytes: the head cut falls inside one, the tail cut inside another.
		{"head and tail cut on rune boundaries", 6, []string{"abéxxxxxxéyz"}, "ab\n" + notice(10, path) + "yz", true},
		{"invalid bytes replaced", 16, []string{"a\xffb\xfe\xfdc"}, "a\uFFFDb\uFFFDc", false},
		{"odd limit gives the tail the extra byte", 5, []string{"abcdefgh"}, "ab\n" + notice(3, path) + "fgh", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHeadTail(tt.limit)
			for _, w := range tt.writes {
				h.Write([]byte(w))
			}
			got, truncated := h.Text(path)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Text mismatch (-want +got):\n%s", diff)
			}
			if truncated != tt.wantTruncated {
				t.Errorf("truncated = %v, want %v", truncated, tt.wantTruncated)
			}
		})
	}
}

// TestHeadTailMatchesNaive compares the ring buffer with keeping everything,
// over random write sizes, limits and contents.
func TestHeadTailMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 500 {
		limit := 1 + rng.IntN(64)
		h := newHeadTail(limit)
		var all []byte
		for range rng.IntN(20) {
			p := make([]byte, rng.IntN(3*limit))
			for i := range p {
				p[i] = "ab\n\xc3\xa9\xff"[rng.IntN(6)]
			}
			h.Write(p)
			all = append(all, p...)
		}
		headN, tailN := limit/2, limit-limit/2
		got, truncated := h.Text("P")
		if len(all) <= limit {
			if want := strings.ToValidUTF8(string(all), "\uFFFD"); got != want || truncated {
				t.Fatalf("iter %d: Text = %q, %v; want %q, false", iter, got, truncated, want)
			}
			continue
		}
		head := trimPartialRuneEnd(all[:headN])
		tail := trimPartialRuneStart(all[len(all)-tailN:])
		omitted := len(all) - len(head) - len(tail)
		sep := "\n"
		if len(head) == 0 || head[len(head)-1] == '\n' {
			sep = ""
		}
		want := strings.ToValidUTF8(string(head), "\uFFFD") + sep + notice(omitted, "P") + strings.ToValidUTF8(string(tail), "\uFFFD")
		if got != want || !truncated {
			t.Fatalf("iter %d (limit %d, %d bytes): Text = %q, %v; want %q, true", iter, limit, len(all), got, truncated, want)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("iter %d: invalid UTF-8 %q", iter, got)
		}
	}
}

func TestHeadTailRuneTrims(t *testing.T) {
	tests := []struct {
		in, wantEnd, wantStart string
	}{
		{"", "", ""},
		{"abc", "abc", "abc"},
		{"ab\xe2\x9c", "ab", "ab\xe2\x9c"},                     // ✓ cut after 2 of 3 bytes
		{"\x9c\x93ab", "\x9c\x93ab", "ab"},                     // the rest of a ✓
		{"ab\xe2\x9c\x93", "ab\xe2\x9c\x93", "ab\xe2\x9c\x93"}, // whole
		{"\x80\x80\x80\x80a", "\x80\x80\x80\x80a", "\x80a"},    // at most 3 dropped
	}
	for _, tt := range tests {
		if got := string(trimPartialRuneEnd([]byte(tt.in))); got != tt.wantEnd {
			t.Errorf("trimPartialRuneEnd(%q) = %q, want %q", tt.in, got, tt.wantEnd)
		}
		if got := string(trimPartialRuneStart([]byte(tt.in))); got != tt.wantStart {
			t.Errorf("trimPartialRuneStart(%q) = %q, want %q", tt.in, got, tt.wantStart)
		}
	}
}

func TestHeadTailMemoryBounded(t *testing.T) {
	h := newHeadTail(1024)
	chunk := bytes.Repeat([]byte("z"), 4096)
	for range 1000 {
		h.Write(chunk)
	}
	if cap(h.head) > 512 || len(h.tail) > 512 {
		t.Errorf("head cap %d, tail len %d: want <= 512 each", cap(h.head), len(h.tail))
	}
	if h.total != 4096*1000 {
		t.Errorf("total = %d, want %d", h.total, 4096*1000)
	}
}
