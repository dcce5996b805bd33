package capture

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits of the step-marker syntax. They are shared by parseMarker and by the
// Capture's decision to hold back a partial stderr line, and must agree: a
// prefix that markerCandidate rejects can never grow into a line that
// parseMarker accepts, or the result would depend on how writes were split.
const (
	// maxMarkerLine is the longest line (without its newline) that can be a
	// marker. A longer line is plain output and is streamed through.
	maxMarkerLine = 64 << 10
	// maxStepRunes is where a step name is cut.
	maxStepRunes = 128
	// maxMarkerIndent is the most spaces or tabs that may precede a marker.
	maxMarkerIndent = 32
	// markerDecidePrefix is how many leading bytes of a line markerCandidate
	// needs to see: indentation, then at most "[HEARTBEAT]" (11 bytes) or a
	// glyph, U+FE0F and a space (7 bytes).
	markerDecidePrefix = 64
)

// MarkerKind tells a step marker from a heartbeat.
type MarkerKind int

const (
	// MarkerStep is a step transition: start, done, fail or skip.
	MarkerStep MarkerKind = iota + 1
	// MarkerHeartbeat says a step is still alive.
	MarkerHeartbeat
)

// String returns "step" or "heartbeat".
func (k MarkerKind) String() string {
	switch k {
	case MarkerStep:
		return "step"
	case MarkerHeartbeat:
		return "heartbeat"
	}
	return "MarkerKind(" + strconv.Itoa(int(k)) + ")"
}

// Marker is one step marker or heartbeat that a child wrote at the start of a
// stderr line or on its events pipe.
type Marker struct {
	Kind MarkerKind
	// Step is the step name, sanitised: valid UTF-8, control and bidi
	// control characters stripped, spaces trimmed, at most 128 runes.
	Step string
	// Status is "start", "done", "fail" or "skip" for MarkerStep, and empty
	// for MarkerHeartbeat. A ⚠ line is "done" with Warning set.
	Status  string
	Warning bool
	// Index is the 1-based step index when the marker gives one, else 0.
	// "[STEP 02/22]" counts from 0 on the wire, so its Index is 3; a JSON
	// "index" field is taken as 1-based.
	Index int
	// Total is the number of steps, 0 when unknown ("??" or absent).
	Total int
	// Elapsed is the duration the marker states, else 0.
	Elapsed time.Duration
	// TS is the time the marker states, else the zero time.
	TS time.Time
	// Raw is the line exactly as passed to parseMarker (no newline; a
	// trailing CR, if any, is kept).
	Raw string
}

// markerGlyphs are the leading symbols of the "  ✓ step (38.2s)" form.
var markerGlyphs = [...]struct {
	enc     string
	status  string
	warning bool
}{
	{"✓", "done", false},
	{"✗", "fail", false},
	{"⊘", "skip", false},
	{"⚠", "done", true},
}

const (
	// glyphLeadByte is the first byte of every glyph's UTF-8 encoding; a
	// line starting with anything else skips the glyph checks.
	glyphLeadByte = 0xE2

	markerStepPrefix      = "[STEP "
	markerHeartbeatPrefix = "[HEARTBEAT]"
	// variationSelector16 may follow a glyph ("⚠️").
	variationSelector16 = "\uFE0F"
)

// parseMarker reports whether line (one line without its newline) is a step
// marker, and parses it. A trailing CR is ignored. Up to 32 spaces or tabs may
// precede any form. The forms are:
//
//	{"type":"step_transition","step":"build","status":"start","ts":1743554401.12}
//	{"type":"heartbeat","step":"build","elapsedMs":10000}
//	[STEP 02/22] step-id @ 2026-03-23T14:05:58Z
//	[HEARTBEAT] step-id — 10s elapsed
//	  ✓ step-id (38.2s)
//
// JSON markers must be one valid JSON object whose "type" is step_transition
// (with "status" start|done|fail|skip and a non-empty "step") or heartbeat;
// other fields are tolerated, and optional fields of an unexpected type are
// ignored. Text forms need a non-empty step name. A line longer than 64 KiB is
// never a marker. parseMarker never panics, whatever the bytes.
func parseMarker(line []byte) (Marker, bool) {
	if len(line) > maxMarkerLine {
		return Marker{}, false
	}
	body := line
	if n := len(body); n > 0 && body[n-1] == '\r' {
		body = body[:n-1]
	}
	rest, ok := skipMarkerIndent(body)
	if !ok || len(rest) == 0 {
		return Marker{}, false
	}
	var m Marker
	switch rest[0] {
	case '{':
		m, ok = parseJSONMarker(rest)
	case '[':
		m, ok = parseBracketMarker(rest)
	case glyphLeadByte:
		m, ok = parseGlyphMarker(rest)
	default:
		return Marker{}, false
	}
	if !ok {
		return Marker{}, false
	}
	m.Raw = string(line)
	return m, true
}

// skipMarkerIndent drops up to maxMarkerIndent leading spaces or tabs; more
// indentation than that means the line is not a marker.
func skipMarkerIndent(b []byte) ([]byte, bool) {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
		if i > maxMarkerIndent {
			return nil, false
		}
	}
	return b[i:], true
}

// markerCandidate reports whether a partial line starting with prefix could
// still become a marker, looking only at its first markerDecidePrefix bytes
// (the caller checks the length limit). It errs towards true, never towards
// false: if it returns false, parseMarker rejects every line that starts with
// prefix.
func markerCandidate(prefix []byte) bool {
	if len(prefix) > markerDecidePrefix {
		prefix = prefix[:markerDecidePrefix]
	}
	rest, ok := skipMarkerIndent(prefix)
	if !ok {
		return false
	}
	if len(rest) == 0 {
		return true
	}
	switch rest[0] {
	case '{':
		return true
	case '[':
		return prefixCompatible(rest, markerStepPrefix) || prefixCompatible(rest, markerHeartbeatPrefix)
	}
	for _, g := range markerGlyphs {
		if !prefixCompatible(rest, g.enc) {
			continue
		}
		if len(rest) <= len(g.enc) {
			return true
		}
		after := rest[len(g.enc):]
		if prefixCompatible(after, variationSelector16) {
			if len(after) <= len(variationSelector16) {
				return true
			}
			after = after[len(variationSelector16):]
		}
		return after[0] == ' ' || after[0] == '\t'
	}
	return false
}

// prefixCompatible reports whether b and s agree on their common length.
func prefixCompatible(b []byte, s string) bool {
	n := min(len(b), len(s))
	return string(b[:n]) == s[:n]
}

// parseJSONMarker parses the JSON forms.
func parseJSONMarker(b []byte) (Marker, bool) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil || fields == nil {
		return Marker{}, false
	}
	var typ string
	if json.Unmarshal(fields["type"], &typ) != nil {
		return Marker{}, false
	}
	var m Marker
	var step string
	stepRaw, hasStep := fields["step"]
	if hasStep && json.Unmarshal(stepRaw, &step) != nil {
		return Marker{}, false
	}
	switch typ {
	case "step_transition":
		var status string
		if json.Unmarshal(fields["status"], &status) != nil {
			return Marker{}, false
		}
		switch status {
		case "start", "done", "fail", "skip":
		default:
			return Marker{}, false
		}
		m = Marker{Kind: MarkerStep, Status: status}
		var warning bool
		if raw, ok := fields["warning"]; ok && json.Unmarshal(raw, &warning) == nil {
			m.Warning = warning
		}
	case "heartbeat":
		m = Marker{Kind: MarkerHeartbeat}
	default:
		return Marker{}, false
	}
	m.Step = sanitizeStepName([]byte(step))
	if m.Kind == MarkerStep && m.Step == "" {
		return Marker{}, false
	}
	m.Index = jsonCount(fields["index"])
	m.Total = jsonCount(fields["total"])
	m.TS = jsonTime(fields["ts"])
	for _, k := range [...]string{"elapsedMs", "elapsed_ms", "durationMs", "duration_ms"} {
		if raw, ok := fields[k]; ok {
			var ms float64
			if json.Unmarshal(raw, &ms) == nil {
				if d, ok := secondsDuration(ms / 1000); ok {
					m.Elapsed = d
					return m, true
				}
			}
		}
	}
	for _, k := range [...]string{"elapsed", "elapsed_s", "duration"} {
		if d, ok := jsonDuration(fields[k]); ok {
			m.Elapsed = d
			break
		}
	}
	return m, true
}

// jsonCount decodes a non-negative integer field, or returns 0.
func jsonCount(raw json.RawMessage) int {
	var f float64
	if raw == nil || json.Unmarshal(raw, &f) != nil {
		return 0
	}
	if f < 0 || f > 1e9 || f != math.Trunc(f) {
		return 0
	}
	return int(f)
}

// jsonTime decodes a time given as Unix seconds (a number, fractions allowed)
// or as an RFC 3339 string, or returns the zero time.
func jsonTime(raw json.RawMessage) time.Time {
	if raw == nil {
		return time.Time{}
	}
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		if f <= 0 || f > 1e11 {
			return time.Time{}
		}
		return time.UnixMicro(int64(math.Round(f * 1e6)))
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return t
		}
	}
	return time.Time{}
}

// jsonDuration decodes seconds (a number) or a Go duration string ("10s").
func jsonDuration(raw json.RawMessage) (time.Duration, bool) {
	if raw == nil {
		return 0, false
	}
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		return secondsDuration(f)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return parseElapsed(s)
	}
	return 0, false
}

// secondsDuration converts seconds to a Duration, refusing negative, NaN and
// absurd values.
func secondsDuration(sec float64) (time.Duration, bool) {
	if !(sec >= 0 && sec <= 1e9) {
		return 0, false
	}
	return time.Duration(math.Round(sec * float64(time.Second))), true
}

// parseElapsed parses "38.2s", "1m30s", "250ms" or a bare number of seconds.
func parseElapsed(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	if d, err := time.ParseDuration(s); err == nil {
		return d, d >= 0
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return secondsDuration(f)
	}
	return 0, false
}

// parseBracketMarker parses "[STEP 02/22] step @ time" and
// "[HEARTBEAT] step — 10s elapsed".
func parseBracketMarker(b []byte) (Marker, bool) {
	if rest, ok := bytes.CutPrefix(b, []byte(markerStepPrefix)); ok {
		return parseStepLine(rest)
	}
	if rest, ok := bytes.CutPrefix(b, []byte(markerHeartbeatPrefix)); ok {
		return parseHeartbeatLine(rest)
	}
	return Marker{}, false
}

// parseStepLine parses what follows "[STEP ": "02/22] step-id @ time".
func parseStepLine(b []byte) (Marker, bool) {
	idx, b, ok := leadingNumber(b)
	if !ok || len(b) == 0 || b[0] != '/' {
		return Marker{}, false
	}
	b = b[1:]
	total := 0
	if rest, unknown := bytes.CutPrefix(b, []byte("??")); unknown {
		b = rest
	} else if total, b, ok = leadingNumber(b); !ok {
		return Marker{}, false
	}
	if len(b) < 2 || b[0] != ']' || (b[1] != ' ' && b[1] != '\t') {
		return Marker{}, false
	}
	name := b[2:]
	var ts time.Time
	if at := bytes.LastIndex(name, []byte(" @ ")); at >= 0 {
		if t, err := time.Parse(time.RFC3339Nano, string(bytes.TrimSpace(name[at+3:]))); err == nil {
			ts, name = t, name[:at]
		}
	}
	step := sanitizeStepName(name)
	if step == "" {
		return Marker{}, false
	}
	return Marker{Kind: MarkerStep, Step: step, Status: "start", Index: idx + 1, Total: total, TS: ts}, true
}

// leadingNumber parses 1 to 9 decimal digits.
func leadingNumber(b []byte) (int, []byte, bool) {
	n, i := 0, 0
	for i < len(b) && i < 9 && b[i] >= '0' && b[i] <= '9' {
		n = n*10 + int(b[i]-'0')
		i++
	}
	if i == 0 || (i < len(b) && b[i] >= '0' && b[i] <= '9') {
		return 0, b, false
	}
	return n, b[i:], true
}

// heartbeatSeparators split a heartbeat's step from its elapsed time.
var heartbeatSeparators = [...]string{" — ", " -- ", " - "}

// parseHeartbeatLine parses what follows "[HEARTBEAT]": " step — 10s elapsed".
func parseHeartbeatLine(b []byte) (Marker, bool) {
	if len(b) == 0 || (b[0] != ' ' && b[0] != '\t') {
		return Marker{}, false
	}
	name := b
	var elapsed time.Duration
	for _, sep := range heartbeatSeparators {
		at := bytes.LastIndex(b, []byte(sep))
		if at < 0 {
			continue
		}
		tail := strings.TrimSpace(string(b[at+len(sep):]))
		tail = strings.TrimSpace(strings.TrimSuffix(tail, "elapsed"))
		if d, ok := parseElapsed(tail); ok {
			name, elapsed = b[:at], d
			break
		}
	}
	step := sanitizeStepName(name)
	if step == "" {
		return Marker{}, false
	}
	return Marker{Kind: MarkerHeartbeat, Step: step, Elapsed: elapsed}, true
}

// parseGlyphMarker parses "✓ step (38.2s)" and its ✗ ⊘ ⚠ variants.
func parseGlyphMarker(b []byte) (Marker, bool) {
	for _, g := range markerGlyphs {
		rest, ok := bytes.CutPrefix(b, []byte(g.enc))
		if !ok {
			continue
		}
		rest, _ = bytes.CutPrefix(rest, []byte(variationSelector16))
		if len(rest) == 0 || (rest[0] != ' ' && rest[0] != '\t') {
			return Marker{}, false
		}
		name := bytes.TrimRight(rest, " \t")
		var elapsed time.Duration
		if n := len(name); n > 0 && name[n-1] == ')' {
			if open := bytes.LastIndexByte(name, '('); open >= 0 {
				if d, ok := parseElapsed(string(name[open+1 : n-1])); ok {
					name, elapsed = name[:open], d
				}
			}
		}
		step := sanitizeStepName(name)
		if step == "" {
			return Marker{}, false
		}
		return Marker{Kind: MarkerStep, Step: step, Status: g.status, Warning: g.warning, Elapsed: elapsed}, true
	}
	return Marker{}, false
}

// sanitizeStepName makes a step name safe to show and send: invalid UTF-8
// becomes U+FFFD, control characters (Cc) and bidi controls are dropped,
// surrounding spaces are trimmed, and the result is cut at maxStepRunes runes.
func sanitizeStepName(b []byte) string {
	b = bytes.TrimSpace(b)
	var sb strings.Builder
	sb.Grow(min(len(b), 4*maxStepRunes))
	n := 0
	for len(b) > 0 && n < maxStepRunes {
		r, size := utf8.DecodeRune(b)
		b = b[size:]
		if unicode.IsControl(r) || isBidiControl(r) {
			continue
		}
		sb.WriteRune(r)
		n++
	}
	return strings.TrimSpace(sb.String())
}

// isBidiControl reports the explicit bidirectional formatting characters,
// which can make a name display as something else.
func isBidiControl(r rune) bool {
	return r == '\u061C' || r == '\u200E' || r == '\u200F' ||
		(r >= '\u202A' && r <= '\u202E') || (r >= '\u2066' && r <= '\u2069')
}
