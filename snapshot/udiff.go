package snapshot

import (
	"fmt"
	"strings"
)

// unifiedDiff returns a unified diff (3 lines of context) of two texts, ""
// when they are equal. Lines are compared whole; a last line without a
// newline is marked "\ No newline at end of file", as diff(1) does.
func unifiedDiff(aName, bName string, a, b []byte) string {
	al, bl := splitLines(string(a)), splitLines(string(b))
	ops := diffLines(al, bl)
	changed := false
	for _, op := range ops {
		if op != '=' {
			changed = true
			break
		}
	}
	if !changed {
		return ""
	}
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", aName, bName)
	const ctx = 3
	// Positions in a and b of each op.
	type pos struct{ i, j int }
	at := make([]pos, len(ops)+1)
	i, j := 0, 0
	for k, op := range ops {
		at[k] = pos{i, j}
		switch op {
		case '=':
			i++
			j++
		case '-':
			i++
		case '+':
			j++
		}
	}
	at[len(ops)] = pos{i, j}
	k := 0
	for k < len(ops) {
		for k < len(ops) && ops[k] == '=' {
			k++
		}
		if k == len(ops) {
			break
		}
		// A hunk: from ctx equal lines before the change to ctx after the
		// last change that is within 2*ctx of the next.
		start := max(0, k-ctx)
		end := k
		for {
			for end < len(ops) && ops[end] != '=' {
				end++
			}
			run := end
			for run < len(ops) && ops[run] == '=' {
				run++
			}
			if run < len(ops) && run-end <= 2*ctx {
				end = run
				continue
			}
			end = min(len(ops), end+ctx)
			break
		}
		s, e := at[start], at[end]
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(s.i, e.i-s.i), hunkRange(s.j, e.j-s.j))
		for x := start; x < end; x++ {
			var line string
			switch ops[x] {
			case '=':
				line = al[at[x].i]
			case '-':
				line = al[at[x].i]
			case '+':
				line = bl[at[x].j]
			}
			prefix := " "
			if ops[x] != '=' {
				prefix = string(ops[x])
			}
			out.WriteString(prefix)
			out.WriteString(line)
			if !strings.HasSuffix(line, "\n") {
				out.WriteString("\n\\ No newline at end of file\n")
			}
		}
		k = end
	}
	return out.String()
}

func hunkRange(start, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

// splitLines splits after each newline; the last line may lack one.
func splitLines(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// maxEdits bounds the Myers search (its memory grows with the square of
// the edits); past it the differing middle is shown replaced whole.
const maxEdits = 1000

// diffLines returns the edit script from a to b: '=' keep, '-' delete,
// '+' insert, with Myers' O(ND) algorithm on the lines between the common
// prefix and suffix.
func diffLines(a, b []string) []byte {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ops := make([]byte, 0, len(a)+len(b))
	for range pre {
		ops = append(ops, '=')
	}
	ops = append(ops, myers(a[pre:len(a)-suf], b[pre:len(b)-suf])...)
	for range suf {
		ops = append(ops, '=')
	}
	return ops
}

func myers(as, bs []string) []byte {
	// Lines as numbers, so that comparisons are cheap.
	ids := map[string]int32{}
	num := func(ls []string) []int32 {
		out := make([]int32, len(ls))
		for i, l := range ls {
			id, ok := ids[l]
			if !ok {
				id = int32(len(ids))
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	a, b := num(as), num(bs)
	n, m := len(a), len(b)
	replace := func() []byte {
		ops := make([]byte, 0, n+m)
		for range n {
			ops = append(ops, '-')
		}
		for range m {
			ops = append(ops, '+')
		}
		return ops
	}
	if n == 0 || m == 0 {
		return replace()
	}
	maxD := min(n+m, maxEdits)
	off := maxD + 1
	v := make([]int32, 2*maxD+3)
	var trace [][]int32 // v[off-d-1 .. off+d+1] before step d
	found := -1
	for d := 0; d <= maxD && found < 0; d++ {
		trace = append(trace, append([]int32(nil), v[off-d-1:off+d+2]...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || k != d && v[off+k-1] < v[off+k+1] {
				x = int(v[off+k+1])
			} else {
				x = int(v[off+k-1]) + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = int32(x)
			if x >= n && y >= m {
				found = d
				break
			}
		}
	}
	if found < 0 {
		return replace()
	}
	// Walk back through the trace.
	var rev []byte
	x, y := n, m
	for d := found; d > 0; d-- {
		tv := trace[d] // index k maps to k+d+1
		get := func(k int) int { return int(tv[k+d+1]) }
		k := x - y
		var pk int
		if k == -d || k != d && get(k-1) < get(k+1) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := get(pk)
		py := px - pk
		for x > px && y > py {
			rev = append(rev, '=')
			x--
			y--
		}
		if x == px {
			rev = append(rev, '+')
		} else {
			rev = append(rev, '-')
		}
		x, y = px, py
	}
	for x > 0 && y > 0 {
		rev = append(rev, '=')
		x--
		y--
	}
	ops := make([]byte, len(rev))
	for i := range rev {
		ops[i] = rev[len(rev)-1-i]
	}
	return ops
}
