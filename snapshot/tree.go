package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io/fs"
	"strings"
)

// hash32 is a sha256.
type hash32 = [sha256.Size]byte

// Kinds of entries, as written in trees.
const (
	kindFile = 'f'
	kindDir  = 'd'
	kindLink = 'l'
)

// fileStat is what the stat cache compares to tell that a file did not change.
type fileStat struct {
	size, mtime, ctime int64 // times in ns since the epoch
	ino, dev           uint64
}

// node is one entry of a tree: loaded from the store, or scanned from a root.
type node struct {
	name   string
	rel    string // slash path from the root; "" for the root
	kind   byte
	mode   uint32 // permission bits with setuid, setgid and sticky (07777)
	size   int64  // file: bytes; link: len(target); dir: file bytes beneath
	hash   hash32 // file: content; dir: tree object (once known)
	hashed bool   // hash is known
	target string // link
	kids   []*node
	// onWay marks an ancestor of a scoped path: walked, never changed.
	onWay bool
	// loaded: a snapshot directory's kids were read (lazily, by Diff).
	loaded bool

	// From a scan only.
	parent    *node
	st        fileStat
	fromCache bool // hash taken from the stat cache, unread
	gone      bool // vanished while the snapshot was taken
	hides     bool // dir: the scan left an entry of it out (.git, excluded, skipped)
	files     int  // dir: regular files beneath
}

// modeBits turns a FileMode into the 07777 bits written in trees.
func modeBits(m fs.FileMode) uint32 {
	b := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

// fileMode turns 07777 bits into a FileMode for Chmod.
func fileMode(b uint32) fs.FileMode {
	m := fs.FileMode(b & 0o777)
	if b&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if b&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if b&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// kindOf maps a FileMode's type to a tree kind; 0 for what is not taken
// (sockets, fifos, devices).
func kindOf(m fs.FileMode) byte {
	switch {
	case m.IsRegular():
		return kindFile
	case m.IsDir():
		return kindDir
	case m&fs.ModeSymlink != 0:
		return kindLink
	}
	return 0
}

// treeMagic starts every tree object; the digit is the format's version.
//
// After it, each entry of the directory, sorted by name (bytewise):
//
//	kind byte ('f' file, 'd' directory, 'l' symlink)
//	uvarint mode (07777 bits)
//	uvarint size (file: bytes; dir: file bytes beneath; link: target length)
//	uvarint len(name), name
//	file and dir: 32 bytes, the sha256 of the content or of the tree object
//	link: uvarint len(target), target
const treeMagic = "toolhost-snapshot-tree 1\n"

// encodeTree writes a directory's tree object. Entries that vanished during
// the scan are left out.
func encodeTree(kids []*node) []byte {
	size := len(treeMagic)
	for _, k := range kids {
		size += 1 + 4*binary.MaxVarintLen64 + len(k.name) + sha256.Size + len(k.target)
	}
	b := make([]byte, 0, size) // one allocation: appends never grow it
	b = append(b, treeMagic...)
	for _, k := range kids {
		if k.gone {
			continue
		}
		b = append(b, k.kind)
		b = binary.AppendUvarint(b, uint64(k.mode))
		b = binary.AppendUvarint(b, uint64(k.size))
		b = binary.AppendUvarint(b, uint64(len(k.name)))
		b = append(b, k.name...)
		switch k.kind {
		case kindFile, kindDir:
			b = append(b, k.hash[:]...)
		case kindLink:
			b = binary.AppendUvarint(b, uint64(len(k.target)))
			b = append(b, k.target...)
		}
	}
	return b
}

var errBadTree = errors.New("malformed tree object")

// decodeTree parses a tree object; rel is the directory's path, for the
// kids' rel.
func decodeTree(data []byte, rel string) ([]*node, error) {
	if !bytes.HasPrefix(data, []byte(treeMagic)) {
		if bytes.HasPrefix(data, []byte("toolhost-snapshot-tree ")) {
			return nil, errors.New("tree object of an unsupported format version")
		}
		return nil, errBadTree
	}
	data = data[len(treeMagic):]
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(data)
		if n <= 0 {
			return 0, false
		}
		data = data[n:]
		return v, true
	}
	str := func() (string, bool) {
		l, ok := uv()
		if !ok || l > uint64(len(data)) {
			return "", false
		}
		s := string(data[:l])
		data = data[l:]
		return s, true
	}
	var kids []*node
	prev := ""
	for len(data) > 0 {
		k := &node{kind: data[0]}
		data = data[1:]
		mode, ok1 := uv()
		size, ok2 := uv()
		name, ok3 := str()
		if !ok1 || !ok2 || !ok3 || mode > 0o7777 || size > 1<<62 || !validName(name) ||
			(len(kids) > 0 && name <= prev) {
			return nil, errBadTree
		}
		k.mode, k.size, k.name = uint32(mode), int64(size), name
		k.rel = joinRel(rel, name)
		switch k.kind {
		case kindFile, kindDir:
			if len(data) < len(k.hash) {
				return nil, errBadTree
			}
			copy(k.hash[:], data)
			k.hashed = true
			data = data[len(k.hash):]
		case kindLink:
			t, ok := str()
			if !ok || t == "" || strings.IndexByte(t, 0) >= 0 {
				return nil, errBadTree
			}
			k.target = t
		default:
			return nil, errBadTree
		}
		prev = name
		kids = append(kids, k)
	}
	return kids, nil
}

func validName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

func joinRel(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// countTree returns the regular files and their bytes beneath n.
func countTree(n *node) (files int, bytes int64) {
	for _, k := range n.kids {
		switch {
		case k.gone:
		case k.kind == kindFile:
			files++
			bytes += k.size
		case k.kind == kindDir:
			f, b := countTree(k)
			files += f
			bytes += b
		}
	}
	return files, bytes
}
