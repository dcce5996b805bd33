package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/toolhost/toolhost/internal/fsutil"
)

// cloneFile makes dst share src's data (FICLONE on Linux). It is a variable
// so that tests can answer for the filesystem: any error means "copy
// instead".
var cloneFile = platformClone

// cloneUnsupported reports an answer meaning the filesystem (or the pair of
// them) has no reflinks, so that a caller stops asking.
func cloneUnsupported(err error) bool {
	return errors.Is(err, errors.ErrUnsupported) || errors.Is(err, syscall.EOPNOTSUPP) ||
		errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EXDEV) ||
		errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.ENOTTY)
}

// wrapWriter lets tests put a failing writer (a full disk) between the
// store and the files it writes. Identity in production.
var wrapWriter = func(w io.Writer) io.Writer { return w }

const bufSize = 256 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

func getBuf() *[]byte  { return bufPool.Get().(*[]byte) }
func putBuf(b *[]byte) { bufPool.Put(b) }

// shardPath is the directory blob h is in.
func (s *Store) shardPath(h hash32) string {
	return filepath.Join(s.dir, "blobs", hex.EncodeToString(h[:1]))
}

func (s *Store) blobPath(h hash32) string {
	x := hex.EncodeToString(h[:])
	return filepath.Join(s.dir, "blobs", x[:2], x[2:])
}

// blobReader reads a blob and checks, at its end, that it has the size and
// hash its name says.
type blobReader struct {
	rc      io.ReadCloser
	f       *os.File // a loose blob's file, for a clone; nil for a packed one
	h       hash.Hash
	want    hash32
	size, n int64 // size -1: unknown
	forPath string
}

// openBlob opens a blob for reading; forPath names what it is read for, in
// errors. A missing blob is ErrDamaged.
func (s *Store) openBlob(h hash32, size int64, forPath string) (*blobReader, error) {
	f, err := os.Open(s.blobPath(h))
	if errors.Is(err, fs.ErrNotExist) {
		loc, ok := s.packed(h, -1)
		if !ok {
			return nil, damaged(h, forPath, "missing")
		}
		rc, err := s.openPacked(h, loc, forPath)
		if err != nil {
			return nil, err
		}
		return &blobReader{rc: rc, h: sha256.New(), want: h, size: size, forPath: forPath}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot store: %w", err)
	}
	return &blobReader{rc: f, f: f, h: sha256.New(), want: h, size: size, forPath: forPath}, nil
}

func (r *blobReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	r.h.Write(p[:n])
	r.n += int64(n)
	if r.size >= 0 && r.n > r.size {
		return n, damaged(r.want, r.forPath, "longer than recorded")
	}
	if err == io.EOF {
		if r.size >= 0 && r.n != r.size {
			return n, damaged(r.want, r.forPath, fmt.Sprintf("%d bytes where %d were recorded", r.n, r.size))
		}
		var got hash32
		r.h.Sum(got[:0])
		if got != r.want {
			return n, damaged(r.want, r.forPath, "content does not match its hash")
		}
	}
	return n, err
}

func (r *blobReader) Close() error { return r.rc.Close() }

// readBlob reads a whole blob (a tree object), checked.
func (s *Store) readBlob(h hash32, size int64, forPath string) ([]byte, error) {
	r, err := s.openBlob(h, size, forPath)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(r); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// verifyBlob reads a blob through and checks it.
func (s *Store) verifyBlob(h hash32, size int64, forPath string) error {
	r, err := s.openBlob(h, size, forPath)
	if err != nil {
		return err
	}
	defer r.Close()
	buf := getBuf()
	defer putBuf(buf)
	for {
		_, err := r.Read(*buf)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// hashReader hashes r to its end.
func hashReader(r io.Reader) (hash32, int64, error) {
	h := sha256.New()
	buf := getBuf()
	defer putBuf(buf)
	n, err := io.CopyBuffer(h, onlyReader{r}, *buf)
	var sum hash32
	h.Sum(sum[:0])
	return sum, n, err
}

// writeAtomic writes data to path whole, through fsutil's temporary file
// beside it (".name.tmp-*") and a rename, with the fsyncs d asks for: the
// name, once there, has all of data or (fsutil.RenameOnly, after a crash)
// may not. The data goes through wrapWriter, as every write of the store.
func writeAtomic(path string, data []byte, d fsutil.Durability) error {
	tmp, err := fsutil.CreateTemp(path, 0o600)
	if err != nil {
		return err
	}
	if _, err := wrapWriter(tmp.File).Write(data); err != nil {
		tmp.Discard()
		return err
	}
	return tmp.Commit(d)
}
