package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// TestEncodeTreeFormat pins a tree object's bytes: a tree's hash names it
// in every store, so an encoding that changed would orphan every tree
// written before (and every snapshot would read as changed).
func TestEncodeTreeFormat(t *testing.T) {
	kids := []*node{
		{name: "a.txt", kind: kindFile, mode: 0o644, size: 5, hash: sha256.Sum256([]byte("hello"))},
		{name: "big", kind: kindFile, mode: 0o4755, size: 1 << 40, hash: sha256.Sum256([]byte("big"))},
		{name: "gone", kind: kindFile, mode: 0o644, gone: true},
		{name: "link", kind: kindLink, mode: 0o777, size: 8, target: "../a.txt"},
		{name: "sub dir", kind: kindDir, mode: 0o1777, size: 300, hash: sha256.Sum256([]byte("tree"))},
		{name: "ünï", kind: kindFile, mode: 0o600, hash: sha256.Sum256(nil)},
	}
	got := sha256.Sum256(encodeTree(kids))
	const want = "b23168d50cc26851036b3dc2e4616468b8fe679922320d7c0e8b648eca9b5b41"
	if hex.EncodeToString(got[:]) != want {
		t.Errorf("tree object's hash = %x, want %s: the tree format changed", got, want)
	}
	back, err := decodeTree(encodeTree(kids), "d")
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 5 || back[3].rel != "d/sub dir" || back[2].target != "../a.txt" {
		t.Errorf("decoded %d kids: %+v", len(back), back)
	}
}

// TestTreeCacheBounded: the cache holds at most treeCacheMax bytes; full,
// it is emptied before the next tree goes in.
func TestTreeCacheBounded(t *testing.T) {
	var c treeCache
	big := make([]byte, treeCacheMax/2+1)
	a, b := sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b"))
	c.put(a, big)
	if c.get(a) == nil {
		t.Fatal("a tree put is not there")
	}
	c.put(b, big)
	if c.get(a) != nil || c.get(b) == nil || c.bytes != len(big) {
		t.Errorf("after a put past the bound: a %v, b %v, %d bytes", c.get(a) != nil, c.get(b) != nil, c.bytes)
	}
	c.put(a, make([]byte, treeCacheMax+1))
	if c.get(a) != nil {
		t.Error("a tree larger than the bound was kept")
	}
}
