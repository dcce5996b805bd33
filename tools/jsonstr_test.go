package tools

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolhost/toolhost/protocol"
)

// jsonStringCases are strings whose encodings differ in every way
// encoding/json's can: escapes by name, \u00XX, HTML characters, U+2028
// and U+2029, invalid UTF-8 and multi-byte runes, at every offset of an
// eight-byte word.
var jsonStringCases = []string{
	"", "a", "abcdefgh", "abcdefghi", "\x00", "\x1f", "\x7f", "\"\\/",
	"<script>&amp;</script>", "\b\f\n\r\t\v",
	"line one\nline two\n", "héllo wörld, ℃, 😀",
	"\u2028\u2029", "a\u2028b\u2029c", "\xe2\x80", "\xe2\x80\xa8x", "\xff\xfe\xfd",
	"\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "abc\xe2",
	strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_\n", 64),
}

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	check := func(s string) {
		t.Helper()
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Fatalf("appendJSONString(%q) = %s, encoding/json gives %s", s, got, want)
		}
	}
	for _, c := range jsonStringCases {
		for pad := range 9 {
			check(strings.Repeat("x", pad) + c)
			check(c + strings.Repeat("y", pad))
		}
	}
	// Random bytes, biased towards those that need escaping.
	alphabet := []byte("ab<>&\"\\\n\t\x00\x1f\x7f\x80\xbf\xc3\xa9\xe2\x80\xa8\xa9\xf0\x9f\x98\x80\xff ")
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			if r.IntN(4) == 0 {
				b[i] = byte(r.IntN(256))
			} else {
				b[i] = alphabet[r.IntN(len(alphabet))]
			}
		}
		check(string(b))
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, c := range jsonStringCases {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); string(got) != string(want) {
			t.Fatalf("appendJSONString(%q) = %s, encoding/json gives %s", s, got, want)
		}
	})
}

func TestAppendReadFileResultMatchesEncodingJSON(t *testing.T) {
	mtime := time.Date(2026, 11, 23, 16, 48, 0, 123456789, time.UTC)
	results := []protocol.ReadFileResult{
		{},
		{Path: "/w/a.txt", Content: "hello\n<b>&</b>\n", Encoding: protocol.EncodingUTF8, Size: 16, StartLine: 1, EndLine: 2, TotalLines: 2, MTime: mtime},
		{Path: "/w/b.bin", Content: "AAEC", Encoding: protocol.EncodingBase64, Size: 3, StartLine: 1, Truncated: true, MTime: mtime.In(time.FixedZone("x", -7*3600))},
		{Path: "/w/c\u2028.txt", Content: strings.Repeat("x\u2028\xff\n", 1000), Size: -1, StartLine: 5, EndLine: 4, TotalLines: 3},
	}
	// Every field set, by reflection: a field added to the type and not to
	// appendReadFileResult shows up in encoding/json's output only; a
	// field of a kind filled in here fails the test until both are.
	var full protocol.ReadFileResult
	v := reflect.ValueOf(&full).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case f.Type() == reflect.TypeFor[time.Time]():
			f.Set(reflect.ValueOf(mtime))
		case f.Kind() == reflect.String:
			f.SetString(fmt.Sprintf("<%s>\n", v.Type().Field(i).Name))
		case f.CanInt():
			f.SetInt(int64(1000 + i))
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		default:
			t.Fatalf("protocol.ReadFileResult.%s is a %v: teach appendReadFileResult and this test to encode it", v.Type().Field(i).Name, f.Type())
		}
	}
	results = append(results, full)
	for _, r := range results {
		want, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendReadFileResult(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("appendReadFileResult(%+v) =\n%s\nencoding/json gives\n%s", r, got, want)
		}
	}
	// A time encoding/json refuses is refused.
	if _, err := appendReadFileResult(nil, &protocol.ReadFileResult{MTime: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}); err == nil {
		t.Error("appendReadFileResult encoded the year 10000, which encoding/json refuses")
	}
}

func BenchmarkAppendJSONString4K(b *testing.B) {
	s := jsonStringCases[len(jsonStringCases)-1]
	buf := make([]byte, 0, 8192)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = appendJSONString(buf[:0], s)
	}
}

func BenchmarkEncodingJSONString4K(b *testing.B) {
	s := jsonStringCases[len(jsonStringCases)-1]
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		json.Marshal(s)
	}
}

func TestEscapeMask(t *testing.T) {
	needs := func(b byte) bool {
		return b < 0x20 || b >= 0x80 || b == '"' || b == '\\' || b == '<' || b == '>' || b == '&'
	}
	first := func(w []byte) int {
		m := escapeMask(load64(string(w))) & high
		if m == 0 {
			return 8
		}
		return bits.TrailingZeros64(m) >> 3
	}
	for b := range 256 {
		for pos := range 8 {
			w := []byte("abcdefgh")
			w[pos] = byte(b)
			want := 8
			if needs(byte(b)) {
				want = pos
			}
			if got := first(w); got != want {
				t.Errorf("escapeMask with %#x at byte %d marks byte %d first, want %d", b, pos, got, want)
			}
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	special := []byte("\x00\x1f\"\\<>&\x80\xff!=?[]")
	for range 100000 {
		w := []byte("abcdefgh")
		for k := r.IntN(5); k > 0; k-- {
			w[r.IntN(8)] = special[r.IntN(len(special))]
		}
		want := 8
		for i, b := range w {
			if needs(b) {
				want = i
				break
			}
		}
		if got := first(w); got != want {
			t.Fatalf("escapeMask(%q) marks byte %d first, want %d", w, got, want)
		}
	}
}
