package stdio

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
)

// Splicer lets a large string go from toolhost's answer to the MCP answer
// still encoded: a tool's result holds a placeholder in its place, and the
// transport writes the string's JSON encoding, as toolhost sent it, where
// the placeholder's is. The SDK then encodes a few bytes instead of the
// string, which it would go over several times (each MarshalJSON of the
// nested content is compacted again), and the string is never decoded.
type Splicer struct {
	// nonce makes the placeholders of a session unguessable, so that no
	// content can hold one by chance.
	nonce string

	mu sync.Mutex
	// next numbers placeholders; pending maps each placeholder's JSON
	// encoding to what replaces it. Guarded by mu. An entry is removed
	// when written, or by its drop when the answer is not sent.
	next    int
	pending map[string]splice
}

// splice is one held string: its JSON encoding, and what to call once the
// answer holding it has been written (nil: nothing).
type splice struct {
	str     json.RawMessage
	written func()
}

func NewSplicer() *Splicer {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return &Splicer{nonce: hex.EncodeToString(b[:]), pending: make(map[string]splice)}
}

// Hold keeps str, a JSON string, and returns the text to put in its place,
// and a drop that forgets it (for an answer that is never written).
func (sp *Splicer) Hold(str json.RawMessage) (placeholder string, drop func()) {
	return sp.HoldThen(str, nil)
}

// HoldThen is hold, and written is called once the answer holding the
// placeholder is on the wire: after its last byte was written, and before
// any message written after it. It is how a task's notifications wait for
// the answer that names the task.
func (sp *Splicer) HoldThen(str json.RawMessage, written func()) (placeholder string, drop func()) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.next++
	placeholder = fmt.Sprintf("\x00toolhost-splice:%s:%d\x00", sp.nonce, sp.next)
	key, _ := json.Marshal(placeholder)
	sp.pending[string(key)] = splice{str: str, written: written}
	return placeholder, func() {
		sp.mu.Lock()
		delete(sp.pending, string(key))
		sp.mu.Unlock()
	}
}

// Apply returns b with every pending placeholder it holds replaced by its
// string, and forgets those; written lists what to call once b has been
// written.
func (sp *Splicer) Apply(b []byte) (out []byte, written []func()) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for key, sl := range sp.pending {
		if i := bytes.Index(b, []byte(key)); i >= 0 {
			out := make([]byte, 0, len(b)-len(key)+len(sl.str))
			out = append(append(append(out, b[:i]...), sl.str...), b[i+len(key):]...)
			b = out
			delete(sp.pending, key)
			if sl.written != nil {
				written = append(written, sl.written)
			}
		}
	}
	return b, written
}

// CutString takes the member key, whose value must be a string, out of the
// JSON object obj, without decoding the string: it returns the string's
// JSON encoding and the object without the member. The other members are
// left for encoding/json, which is then spared a scan of the string
// (toolhost's answers are valid JSON: cutString only finds its way
// through them).
func CutString(obj []byte, key string) (str, rest []byte, err error) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil, nil, fmt.Errorf("not a JSON object")
	}
	i++
	for {
		start := i // where the member begins, its comma included
		i = skipSpace(obj, i)
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
		if i >= len(obj) || obj[i] != '"' {
			return nil, nil, fmt.Errorf("no member %q", key)
		}
		kEnd, err := stringEnd(obj, i)
		if err != nil {
			return nil, nil, err
		}
		var name string
		if err := json.Unmarshal(obj[i:kEnd], &name); err != nil {
			return nil, nil, err
		}
		i = skipSpace(obj, kEnd)
		if i >= len(obj) || obj[i] != ':' {
			return nil, nil, fmt.Errorf("malformed object")
		}
		i = skipSpace(obj, i+1)
		vEnd, err := valueEnd(obj, i)
		if err != nil {
			return nil, nil, err
		}
		if name == key {
			if obj[i] != '"' {
				return nil, nil, fmt.Errorf("member %q is not a string", key)
			}
			str = obj[i:vEnd]
			rest = append(append([]byte(nil), obj[:start]...), obj[vEnd:]...)
			if start == 1 {
				// The first member went: so must the comma after it.
				j := skipSpace(rest, 1)
				if j < len(rest) && rest[j] == ',' {
					rest = append(rest[:1], rest[j+1:]...)
				}
			}
			return str, rest, nil
		}
		i = vEnd
	}
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the JSON string that starts at i.
func stringEnd(b []byte, i int) (int, error) {
	for j := i + 1; ; {
		k := bytes.IndexAny(b[j:], `"\`)
		if k < 0 {
			return 0, fmt.Errorf("unterminated string")
		}
		j += k
		if b[j] == '"' {
			return j + 1, nil
		}
		j += 2 // a backslash and the byte it escapes
	}
}

// valueEnd returns the index after the JSON value that starts at i.
func valueEnd(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, fmt.Errorf("missing value")
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, err := stringEnd(b, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("unterminated value")
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\t' && b[j] != '\r' {
		j++
	}
	return j, nil
}
