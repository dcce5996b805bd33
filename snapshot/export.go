package snapshot

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
)

// ExportOptions shape an Export.
type ExportOptions struct {
	// Skip are paths, relative to the root, left out of the tar (a
	// denyRead path, which an older snapshot may hold).
	Skip []string
}

// Export writes snapshot id to w as a tar: its directories, regular files
// and symlinks, in tree order, with their modes; every entry's time is the
// snapshot's. Each blob is checked as it is copied: a damaged one ends the
// tar with an ErrDamaged error, and w then holds a partial archive (write
// it to a temporary file and keep it only on success).
func (s *Store) Export(ctx context.Context, id string, w io.Writer, o ExportOptions) error {
	if err := s.check(); err != nil {
		return err
	}
	m, err := s.readManifest(id)
	if err != nil {
		return err
	}
	skip, _, err := cleanPaths(m.Root, m.Root, o.Skip)
	if err != nil {
		return err
	}
	unlock, err := s.lockStore(ctx, false)
	if err != nil {
		return err
	}
	defer unlock()
	h, err := m.tree()
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	all := &filter{skip: skip}
	var walk func(n *node) error
	walk = func(n *node) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.loadKids(n, all); err != nil {
			return err
		}
		for _, k := range n.kids {
			hdr := &tar.Header{Name: k.rel, Mode: int64(k.mode), ModTime: m.CreatedAt}
			switch k.kind {
			case kindDir:
				hdr.Typeflag, hdr.Name = tar.TypeDir, k.rel+"/"
			case kindFile:
				hdr.Typeflag, hdr.Size = tar.TypeReg, k.size
			case kindLink:
				hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, k.target
			}
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			switch k.kind {
			case kindFile:
				if err := s.copyBlob(tw, k); err != nil {
					return err
				}
			case kindDir:
				if err := walk(k); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(&node{kind: kindDir, hash: h, hashed: true}); err != nil {
		return fmt.Errorf("export %s: %w", id, err)
	}
	return tw.Close()
}

func (s *Store) copyBlob(w io.Writer, n *node) error {
	r, err := s.openBlob(n.hash, n.size, n.rel)
	if err != nil {
		return err
	}
	defer r.Close()
	buf := getBuf()
	defer putBuf(buf)
	_, err = io.CopyBuffer(onlyWriter{w}, r, *buf)
	return err
}
