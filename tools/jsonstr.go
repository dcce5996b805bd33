package tools

import (
	"math/bits"
	"unicode/utf8"
)

// appendJSONString appends s to dst as a JSON string, byte for byte as
// encoding/json encodes a string: '"', '\\' and the control characters
// escaped (\b, \f, \n, \r and \t by name, the others as \u00XX), '<', '>'
// and '&' escaped as \u003c, \u003e and \u0026, U+2028 and U+2029 escaped,
// and each byte of invalid UTF-8 replaced by \ufffd.
//
// encoding/json looks at one byte at a time, which made the JSON encoding
// of a small readFile answer cost more than reading the file. Here the
// bytes are tested eight at a time, and a run of bytes that need nothing
// is copied whole.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start, i := 0, 0
	for i < len(s) {
		// Skip the words that need nothing, two at a time, then go to the
		// first byte that needs something: the lowest marked byte is exact
		// (see escapeMask), and load64 puts the first byte lowest.
		if i+16 <= len(s) {
			m := escapeMask(load64(s[i:i+8])) & high
			m2 := escapeMask(load64(s[i+8:i+16])) & high
			if m|m2 == 0 {
				i += 16
				continue
			}
			if m == 0 {
				i, m = i+8, m2
			}
			i += bits.TrailingZeros64(m) >> 3
		} else if i+8 <= len(s) {
			m := escapeMask(load64(s[i:i+8])) & high
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) >> 3
		}
		b := s[i]
		if b < utf8.RuneSelf {
			i++
			if htmlSafe[b] {
				continue // in the last seven bytes, read one at a time
			}
			dst = append(dst, s[start:i-1]...)
			start = i
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			start = i + size
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			start = i + size
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// load64 returns the first eight bytes of s, which must have as many, as
// one word; the compiler makes it one load.
func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// hexDigits are the digits of a \u escape, lower case as encoding/json's.
const hexDigits = "0123456789abcdef"

// escapeMask has the high bit of some byte set (in high) if and only if a
// byte of x needs more than a copy: a control character, '"', '\\', '<',
// '>', '&', or a byte of a multi-byte UTF-8 sequence (which may be invalid,
// U+2028 or U+2029); and the lowest byte so marked is the first such byte. The tests are the classic SWAR ones, a
// byte below n ((x-n)|x, which also catches the high bit) and a zero byte
// ((v-1)&^v): a borrow only runs from a byte that matches to the bytes
// above it, so a byte may be marked wrongly only above one that matches.
// '"' and '&' (0x22, 0x26) are one test after OR 0x04, '<' and '>' (0x3c,
// 0x3e) one after OR 0x02.
func escapeMask(x uint64) uint64 {
	q := (x | 0x04*ones) ^ 0x26*ones
	a := (x | 0x02*ones) ^ 0x3e*ones
	b := x ^ 0x5c*ones
	return (x - 0x20*ones) | x | (q-ones)&^q | (a-ones)&^a | (b-ones)&^b
}

// ones and high are a word of 0x01 bytes and one of 0x80 bytes.
const (
	ones = 0x0101010101010101
	high = 0x8080808080808080
)

// htmlSafe is encoding/json's htmlSafeSet: the ASCII bytes copied as they
// are when HTML characters are escaped.
var htmlSafe = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = true
	}
	for _, b := range `"\<>&` {
		t[b] = false
	}
	return t
}()
