package azblob

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/toolhost/toolhost/objstore"
)

// Put writes size bytes of r as the block blob key if cond holds: with
// one Put Blob up to the block size, else with Put Block for each block,
// Concurrency at once, and one Put Block List that commits them, which
// carries cond. Each request carries the MD5 of its body, which the
// service checks.
func (s *Store) Put(ctx context.Context, key string, r io.ReaderAt, size int64, cond objstore.Condition) (objstore.Object, error) {
	if err := checkKey("put", key); err != nil {
		return objstore.Object{}, err
	}
	if size < 0 {
		return objstore.Object{}, &objstore.Error{Op: "put", Key: key, Message: "a negative size"}
	}
	var resp *http.Response
	var err error
	if size <= s.blockSize {
		resp, err = s.putBlob(ctx, key, r, size, cond)
	} else {
		resp, err = s.putBlocks(ctx, key, r, size, cond)
	}
	if err != nil {
		return objstore.Object{}, err
	}
	resp.Body.Close()
	o := object(key, resp.Header)
	o.Size = size // the response's Content-Length is its own, 0
	return o, nil
}

// putBlob writes the blob key with one Put Blob.
func (s *Store) putBlob(ctx context.Context, key string, r io.ReaderAt, size int64, cond objstore.Condition) (*http.Response, error) {
	sum, err := md5Of(r, 0, size)
	if err != nil {
		return nil, readError(key, err)
	}
	c := &call{op: "put", key: key, method: http.MethodPut, blob: true, header: http.Header{},
		body: func() io.Reader { return io.NewSectionReader(r, 0, size) }, size: size}
	c.header.Set("x-ms-blob-type", "BlockBlob")
	c.header.Set("Content-MD5", sum)
	conditions(c.header, cond)
	return s.do(ctx, c)
}

// putBlocks stages the blocks of r and commits them as the blob key.
// Their ids are a random prefix of this upload's and the block's index,
// so that two uploads to one name at once never replace each other's
// blocks. Blocks staged by an upload that fails are not removed (the
// service has no request for it): it discards them itself at the blob's
// next commit, or after a week.
func (s *Store) putBlocks(ctx context.Context, key string, r io.ReaderAt, size int64, cond objstore.Condition) (*http.Response, error) {
	bs := s.blockSize
	if (size+bs-1)/bs > maxBlocks {
		bs = (size + maxBlocks - 1) / maxBlocks
	}
	if bs > maxBlockSize {
		return nil, &objstore.Error{Op: "put", Key: key, Message: "the object is larger than a block blob holds (50,000 blocks of 4,000 MiB)"}
	}
	// Fail before the upload, not after it, where the condition fails
	// already; the commit checks it again.
	if err := s.precheck(ctx, key, cond); err != nil {
		return nil, err
	}
	n := int((size + bs - 1) / bs)
	var upload [8]byte
	rand.Read(upload[:])
	ids := make([]string, n)
	for i := range ids {
		var id [16]byte
		copy(id[:], upload[:])
		binary.BigEndian.PutUint64(id[8:], uint64(i))
		ids[i] = base64.StdEncoding.EncodeToString(id[:])
	}

	ctx2, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	next := make(chan int)
	for range min(s.concurrency, n) {
		wg.Go(func() {
			for i := range next {
				off := int64(i) * bs
				if err := s.putBlock(ctx2, key, ids[i], r, off, min(bs, size-off)); err != nil {
					once.Do(func() { firstErr = err; cancel() })
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx2.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = &objstore.Error{Op: "put", Key: key, Err: ctx.Err()}
	}
	if firstErr != nil {
		return nil, firstErr
	}

	var list bytes.Buffer
	list.WriteString(`<?xml version="1.0" encoding="utf-8"?><BlockList>`)
	for _, id := range ids {
		list.WriteString("<Latest>" + id + "</Latest>")
	}
	list.WriteString("</BlockList>")
	body := list.Bytes()
	sum := md5.Sum(body)
	c := &call{op: "put", key: key, method: http.MethodPut, blob: true, header: http.Header{},
		query: [][2]string{{"comp", "blocklist"}},
		body:  func() io.Reader { return bytes.NewReader(body) }, size: int64(len(body))}
	c.header.Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
	conditions(c.header, cond)
	return s.do(ctx, c)
}

// putBlock stages the block id of the blob key: n bytes of r at off.
func (s *Store) putBlock(ctx context.Context, key, id string, r io.ReaderAt, off, n int64) error {
	sum, err := md5Of(r, off, n)
	if err != nil {
		return readError(key, err)
	}
	c := &call{op: "put", key: key, method: http.MethodPut, blob: true, header: http.Header{},
		query: [][2]string{{"comp", "block"}, {"blockid", id}},
		body:  func() io.Reader { return io.NewSectionReader(r, off, n) }, size: n}
	c.header.Set("Content-MD5", sum)
	resp, err := s.do(ctx, c)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// precheck answers ErrPrecondition where the blob key, as Head sees it
// now, already fails cond.
func (s *Store) precheck(ctx context.Context, key string, cond objstore.Condition) error {
	if cond == (objstore.Condition{}) {
		return nil
	}
	o, err := s.Head(ctx, key)
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		if cond.IfMatch != "" {
			return &objstore.Error{Op: "put", Key: key, Message: "the object to replace is gone (a check before the upload)", Err: objstore.ErrPrecondition}
		}
		return nil
	case err != nil:
		var e *objstore.Error
		if errors.As(err, &e) {
			e.Op = "put"
		}
		return err
	case cond.IfNoneMatch:
		return &objstore.Error{Op: "put", Key: key, Message: "the object exists (a check before the upload)", Err: objstore.ErrPrecondition}
	case cond.IfMatch != "" && etag(cond.IfMatch) != o.Version:
		return &objstore.Error{Op: "put", Key: key, Message: "the object changed (a check before the upload)", Err: objstore.ErrPrecondition}
	}
	return nil
}

// md5Of is the base64 MD5 of n bytes of r at off (a Content-MD5 header),
// read before the body is sent: the service refuses a body that differs,
// which r changing meanwhile would make.
func md5Of(r io.ReaderAt, off, n int64) (string, error) {
	h := md5.New()
	got, err := io.Copy(h, io.NewSectionReader(r, off, n))
	if err != nil {
		return "", err
	}
	if got != n {
		return "", fmt.Errorf("%d bytes at %d, where %d were expected", got, off, n)
	}
	return base64.StdEncoding.EncodeToString(h.Sum(nil)), nil
}

// readError is the error of a Put whose reader failed.
func readError(key string, err error) error {
	return &objstore.Error{Op: "put", Key: key, Message: "reading the object's bytes: " + strings.TrimSpace(err.Error()), Err: err}
}
