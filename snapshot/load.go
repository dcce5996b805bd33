package snapshot

import (
	"context"
	"sync"
)

// loadKids reads a directory's tree object (checked against its hash) and
// sets its kids, filtered.
func (s *Store) loadKids(n *node, f *filter) error {
	data, err := s.readTree(n.hash, n.rel)
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

// treeCacheMax bounds the bytes of tree objects a Store keeps in memory.
const treeCacheMax = 16 << 20

// treeCache holds tree objects read and checked: the trees of a snapshot
// restored again, or diffed, are not read and hashed again. A blob's
// content is its name, so a cached tree is never stale; one damaged on
// disk since it was read is not noticed by what the cache serves, which
// serves the bytes checked. When full it is emptied.
type treeCache struct {
	mu    sync.Mutex
	data  map[hash32][]byte
	bytes int
}

func (c *treeCache) get(h hash32) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.data[h]
}

func (c *treeCache) put(h hash32, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.data == nil || c.bytes+len(data) > treeCacheMax {
		c.data, c.bytes = map[hash32][]byte{}, 0
	}
	if len(data) <= treeCacheMax {
		c.data[h] = data
		c.bytes += len(data)
	}
}

// readTree returns the tree object h, of the directory at rel: from the
// cache, or read from the store and checked.
func (s *Store) readTree(h hash32, rel string) ([]byte, error) {
	if data := s.trees.get(h); data != nil {
		return data, nil
	}
	data, err := s.readBlob(h, -1, "tree of "+relName(rel))
	if err != nil {
		return nil, err
	}
	s.trees.put(h, data)
	return data, nil
}
