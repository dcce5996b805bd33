package snapshot

import (
	"context"
)

// loadKids reads a directory's tree object (checked against its hash) and
// sets its kids, filtered.
func (s *Store) loadKids(n *node, f *filter) error {
	data, err := s.readBlob(n.hash, -1, "tree of "+relName(n.rel))
	if err != nil {
		return err
	}
	kids, err := decodeTree(data, n.rel)
	if err != nil {
		return damaged(n.hash, "tree of "+relName(n.rel), err.Error())
	}
	n.kids = kids[:0]
	for _, k := range kids {
		if f.keep(k, false) {
			n.kids = append(n.kids, k)
		}
	}
	return nil
}

// loadTree reads a snapshot's whole tree (within the filter).
func (s *Store) loadTree(ctx context.Context, m *manifest, f *filter) (*node, error) {
	h, err := m.tree()
	if err != nil {
		return nil, err
	}
	top := &node{kind: kindDir, mode: m.Mode, hash: h, hashed: true}
	var load func(n *node) error
	load = func(n *node) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.loadKids(n, f); err != nil {
			return err
		}
		for _, k := range n.kids {
			if k.kind == kindDir {
				if err := load(k); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return top, load(top)
}

// mergeKids calls f for each name of either list (both sorted by name),
// with the entry of each side or nil.
func mergeKids(a, b []*node, f func(x, y *node) error) error {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var x, y *node
		switch {
		case j >= len(b) || i < len(a) && a[i].name < b[j].name:
			x = a[i]
			i++
		case i >= len(a) || b[j].name < a[i].name:
			y = b[j]
			j++
		default:
			x, y = a[i], b[j]
			i++
			j++
		}
		if err := f(x, y); err != nil {
			return err
		}
	}
	return nil
}

func kidsOf(n *node) []*node {
	if n == nil {
		return nil
	}
	return n.kids
}

// subtreeCount counts n and everything beneath it.
func subtreeCount(n *node) int {
	c := 1
	for _, k := range n.kids {
		c += subtreeCount(k)
	}
	return c
}
