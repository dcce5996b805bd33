//go:build !linux

package gitrepos

import "testing"

// cacheMode is a way a Cache learns of changes; elsewhere than Linux
// there is none (nothing is cached).
type cacheMode struct {
	name  string
	setup func(t *testing.T, c *Cache)
}

// cacheModes are the modes the tests run a Cache in.
var cacheModes = []cacheMode{{"none", func(*testing.T, *Cache) {}}}

// loseEvents does nothing: there are no events.
func loseEvents(*Cache) {}
