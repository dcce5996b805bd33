package mounts

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/toolhost/toolhost/objstore"
)

// file is a listed object that is shown as a file, at Rel.
type file struct {
	objstore.Object
	Rel string // its path under the mount, "/"-separated
}

// listing is one LIST of the mount's prefix, sorted into what is shown.
type listing struct {
	files   []file   // by key
	dirs    []string // directory markers' paths (zero-byte "d/" keys)
	skipped []string // keys that cannot be files, by key
	bytes   int64    // of files
}

// errStop stops a List once a limit is passed.
var errStop = errors.New("stop")

// list lists the mount's prefix once, refusing a listing over m's
// limits before anything is fetched, and sorts its keys into files,
// directories and keys skipped.
func (m *Mount) list(ctx context.Context) (*listing, error) {
	var objs []objstore.Object
	var total int64
	var over error
	err := m.store.List(ctx, m.prefix, func(o objstore.Object) error {
		objs = append(objs, o)
		total += o.Size
		switch {
		case len(objs) > m.lim.MaxObjects:
			over = fmt.Errorf("%w: more than %d objects under %q (MaxObjects)", ErrLimit, m.lim.MaxObjects, m.spec.URI)
			return errStop
		case total > m.lim.MaxBytes:
			over = fmt.Errorf("%w: more than %d bytes under %q (MaxBytes)", ErrLimit, m.lim.MaxBytes, m.spec.URI)
			return errStop
		}
		return nil
	})
	if over != nil {
		return nil, over
	}
	if err != nil {
		return nil, err
	}
	return classify(m.prefix, objs), nil
}

// classify sorts the objects under prefix into files, directories and
// keys skipped. A key is skipped when its path under prefix has an
// empty, "." or ".." component, a NUL or a component over 255 bytes;
// when it ends in "/" and is not empty (a zero-byte one is a directory
// marker: a directory); and when it is a file that another key makes a
// directory ("a" beside "a/b": the directory wins).
func classify(prefix string, objs []objstore.Object) *listing {
	l := &listing{}
	dirSet := map[string]bool{}
	addParents := func(rel string) {
		for i := strings.LastIndexByte(rel, '/'); i > 0; i = strings.LastIndexByte(rel, '/') {
			rel = rel[:i]
			if dirSet[rel] {
				return
			}
			dirSet[rel] = true
		}
	}
	var cand []file
	for _, o := range objs {
		rel := o.Key[len(prefix):]
		switch {
		case rel == "" && o.Size == 0:
			// The prefix's own marker: the mount's root.
		case strings.HasSuffix(rel, "/") && o.Size == 0 && validRel(strings.TrimSuffix(rel, "/")):
			d := strings.TrimSuffix(rel, "/")
			l.dirs = append(l.dirs, d)
			dirSet[d] = true
			addParents(d)
		case rel != "" && !strings.HasSuffix(rel, "/") && validRel(rel):
			cand = append(cand, file{Object: o, Rel: rel})
			addParents(rel)
		default:
			l.skipped = append(l.skipped, o.Key)
		}
	}
	for _, f := range cand {
		if dirSet[f.Rel] {
			l.skipped = append(l.skipped, f.Key)
			continue
		}
		l.files = append(l.files, f)
		l.bytes += f.Size
	}
	sort.Strings(l.skipped)
	return l
}

// validRel reports whether rel, a "/"-separated path, can be a file's
// path under a mount.
func validRel(rel string) bool {
	if rel == "" || strings.IndexByte(rel, 0) >= 0 {
		return false
	}
	for c := range strings.SplitSeq(rel, "/") {
		if c == "" || c == "." || c == ".." || len(c) > 255 {
			return false
		}
	}
	return true
}

// fingerprint identifies what the listing shows: two listings with the
// same fingerprint show the same files, with the same versions, and the
// same directories.
func (l *listing) fingerprint() string {
	h := sha256.New()
	var n [8]byte
	str := func(s string) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	for _, f := range l.files {
		str(f.Rel)
		str(f.Version)
		binary.LittleEndian.PutUint64(n[:], uint64(f.Size))
		h.Write(n[:])
	}
	str("")
	for _, d := range l.dirs {
		str(d)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// objectID names the read-only cache's file of key at version.
func objectID(key, version string) string {
	h := sha256.New()
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write([]byte(version))
	return hex.EncodeToString(h.Sum(nil)[:20])
}
