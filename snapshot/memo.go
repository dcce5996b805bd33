package snapshot

import (
	"encoding/binary"
	"hash/maphash"
)

// A treeMemo is what a Take learned of one directory's tree object: its
// hash, and a fingerprint of what its encoding is made of (each
// kept entry's kind, mode, size, name, and content hash or target). The
// next Take of the root computes the fingerprint, which costs no
// allocation and a fraction of the encoding's hashing, and when it and the
// store's generation are unchanged takes the tree object as known: no
// encoding, no sha256, no look for the blob (a collection, which may have
// removed it, bumps the generation). Encoding and hashing every tree again
// was a noticeable part of an unchanged Take's CPU.
//
// The fingerprint is two 64-bit maphashes with seeds of the Store's, made
// at random when it opens: 128 bits that nothing outside the process
// knows, so that two different directories taken for one would take a
// collision no one can aim at and chance does not make.
type treeMemo struct {
	fp   [2]uint64
	hash hash32
}

// testHookTreeEncoded is called with the path of each directory whose tree
// object a Take encodes (rather than takes from its memo).
var testHookTreeEncoded func(rel string)

// treeMemos are a root's, by directory path, with the store's generation
// they hold for. A map is never changed once published.
type treeMemos struct {
	gen   uint64
	byDir map[string]treeMemo
}

// fingerprint computes a directory's fingerprint over what encodeTree
// writes of its kids.
func (s *Store) fingerprint(kids []*node) [2]uint64 {
	var out [2]uint64
	var tmp [3 * binary.MaxVarintLen64]byte
	for i, seed := range s.memoSeeds {
		var h maphash.Hash
		h.SetSeed(seed)
		for _, k := range kids {
			if k.gone {
				continue
			}
			b := append(tmp[:0], k.kind)
			b = binary.AppendUvarint(b, uint64(k.mode))
			b = binary.AppendUvarint(b, uint64(k.size))
			b = binary.AppendUvarint(b, uint64(len(k.name)))
			h.Write(b)
			h.WriteString(k.name)
			switch k.kind {
			case kindFile, kindDir:
				h.Write(k.hash[:])
			case kindLink:
				h.Write(binary.AppendUvarint(tmp[:0], uint64(len(k.target))))
				h.WriteString(k.target)
			}
		}
		out[i] = h.Sum64()
	}
	return out
}
