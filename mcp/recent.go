package mcp

// recent maps the latest keys put to their values, at most max of them:
// putting one more lets go of the oldest. It is not safe for concurrent
// use: its owner's lock guards it.
type recent[V any] struct {
	max int
	// m holds the values; order lists m's keys, oldest first.
	m     map[string]V
	order []string
}

// newRecent returns a recent that keeps max keys.
func newRecent[V any](max int) recent[V] {
	return recent[V]{max: max, m: make(map[string]V)}
}

// put sets k's value; a new key lets go of the oldest when full.
func (r *recent[V]) put(k string, v V) {
	if _, ok := r.m[k]; !ok {
		if len(r.order) == r.max {
			delete(r.m, r.order[0])
			r.order = append(r.order[:0], r.order[1:]...)
		}
		r.order = append(r.order, k)
	}
	r.m[k] = v
}

// get returns k's value, and whether k is kept.
func (r *recent[V]) get(k string) (V, bool) {
	v, ok := r.m[k]
	return v, ok
}
