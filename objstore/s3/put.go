package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/toolhost/toolhost/objstore"
)

// hashBufs are the buffers sections are hashed through: one per hash at a
// time, so a multipart upload holds Concurrency of them.
var hashBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// hashSection is the hex SHA-256 of size bytes of r from off.
func hashSection(r io.ReaderAt, off, size int64) (string, error) {
	if size == 0 {
		return emptySHA256, nil
	}
	h := sha256.New()
	bp := hashBufs.Get().(*[]byte)
	defer hashBufs.Put(bp)
	n, err := io.CopyBuffer(h, io.NewSectionReader(r, off, size), *bp)
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// condHeader is the If-Match / If-None-Match of cond.
func condHeader(cond objstore.Condition) http.Header {
	h := http.Header{}
	if cond.IfMatch != "" {
		h.Set("If-Match", normETag(cond.IfMatch))
	}
	if cond.IfNoneMatch {
		h.Set("If-None-Match", "*")
	}
	return h
}

// Put writes size bytes of r as key. Up to the part size it is one PUT;
// above, a multipart upload. Either way each body is hashed first (r is
// read twice, and never buffered) and sent plain, its SHA-256 signed.
func (s *Store) Put(ctx context.Context, key string, r io.ReaderAt, size int64, cond objstore.Condition) (objstore.Object, error) {
	if key == "" {
		return objstore.Object{}, &objstore.Error{Op: "put", Message: "an empty key"}
	}
	if size < 0 {
		return objstore.Object{}, &objstore.Error{Op: "put", Key: key, Message: "a negative size"}
	}
	if size <= s.partSize {
		return s.putSingle(ctx, key, r, size, cond)
	}
	return s.putMultipart(ctx, key, r, size, cond)
}

// putSingle is one PutObject. An unconditional one is retried like a read
// (it writes the same bytes again); a conditional one is not: a retry
// after a lost answer would be refused for the write it made.
func (s *Store) putSingle(ctx context.Context, key string, r io.ReaderAt, size int64, cond objstore.Condition) (objstore.Object, error) {
	hash, err := hashSection(r, 0, size)
	if err != nil {
		return objstore.Object{}, &objstore.Error{Op: "put", Key: key, Message: "reading the body", Err: err}
	}
	resp, err := s.do(ctx, &request{op: "put", key: key, method: http.MethodPut,
		path: s.objectPath(key), header: condHeader(cond),
		body: r, size: size, hash: hash, retry: cond == objstore.Condition{}})
	if err != nil {
		return objstore.Object{}, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	return objstore.Object{Key: key, Size: size, Version: normETag(resp.Header.Get("ETag")),
		ModTime: dateOf(resp)}, nil
}

// dateOf is the store's clock when it answered: PUT and Complete answer no
// Last-Modified.
func dateOf(resp *http.Response) time.Time {
	t, _ := http.ParseTime(resp.Header.Get("Date"))
	return t
}

// putMultipart is a multipart upload: Create, Concurrency workers each
// hashing and sending its own part straight from r, then Complete with
// cond's headers. Any failure aborts the upload.
func (s *Store) putMultipart(ctx context.Context, key string, r io.ReaderAt, size int64, cond objstore.Condition) (objstore.Object, error) {
	partSize := s.partSize
	if (size+partSize-1)/partSize > maxParts {
		const mib = 1 << 20
		partSize = ((size+maxParts-1)/maxParts + mib - 1) / mib * mib
	}
	nparts := int((size + partSize - 1) / partSize)

	resp, err := s.do(ctx, &request{op: "put", key: key, method: http.MethodPost,
		path: s.objectPath(key), query: url.Values{"uploads": {""}}})
	if err != nil {
		return objstore.Object{}, err
	}
	var created struct {
		UploadID string `xml:"UploadId"`
	}
	err = xml.NewDecoder(io.LimitReader(resp.Body, maxErrorBody)).Decode(&created)
	resp.Body.Close()
	if err != nil || created.UploadID == "" {
		return objstore.Object{}, &objstore.Error{Op: "put", Key: key, Status: resp.StatusCode,
			Message: "CreateMultipartUpload answered no UploadId", Err: err}
	}
	id := created.UploadID

	etags, err := s.uploadParts(ctx, key, id, r, size, partSize, nparts)
	if err != nil {
		return objstore.Object{}, s.abort(ctx, key, id, err)
	}

	var b bytes.Buffer
	b.WriteString(`<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`)
	for i, etag := range etags {
		b.WriteString("<Part><PartNumber>" + strconv.Itoa(i+1) + "</PartNumber><ETag>")
		xml.EscapeText(&b, []byte(etag))
		b.WriteString("</ETag></Part>")
	}
	b.WriteString("</CompleteMultipartUpload>")
	sum := sha256.Sum256(b.Bytes())
	h := condHeader(cond)
	h.Set("Content-Type", "application/xml")
	resp, err = s.do(ctx, &request{op: "put", key: key, method: http.MethodPost,
		path: s.objectPath(key), query: url.Values{"uploadId": {id}}, header: h,
		body: bytes.NewReader(b.Bytes()), size: int64(b.Len()), hash: hex.EncodeToString(sum[:])})
	if err != nil {
		return objstore.Object{}, s.abort(ctx, key, id, err)
	}
	// Complete may answer 200 and then an <Error> (it sends the status
	// before it has finished): the root element tells.
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	if err != nil {
		return objstore.Object{}, s.abort(ctx, key, id,
			&objstore.Error{Op: "put", Key: key, Status: resp.StatusCode, Message: "reading CompleteMultipartUpload's answer", Err: err})
	}
	var done struct {
		XMLName xml.Name
		ETag    string `xml:"ETag"`
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	if err := xml.Unmarshal(body, &done); err != nil {
		return objstore.Object{}, s.abort(ctx, key, id,
			&objstore.Error{Op: "put", Key: key, Status: resp.StatusCode, Message: "unreadable CompleteMultipartUpload answer", Err: err})
	}
	if done.XMLName.Local == "Error" {
		return objstore.Object{}, s.abort(ctx, key, id, s.newError("put", key, resp.StatusCode, done.Code, done.Message))
	}
	version := normETag(done.ETag)
	if version == "" {
		version = normETag(resp.Header.Get("ETag"))
	}
	return objstore.Object{Key: key, Size: size, Version: version, ModTime: dateOf(resp)}, nil
}

// uploadParts sends the nparts parts, Concurrency at a time, and returns
// their ETags in order. The first failure stops the others.
func (s *Store) uploadParts(ctx context.Context, key, id string, r io.ReaderAt, size, partSize int64, nparts int) ([]string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	etags := make([]string, nparts)
	var (
		once     sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	jobs := make(chan int)
	for range min(s.concurrency, nparts) {
		wg.Go(func() {
			for i := range jobs {
				if ctx.Err() != nil {
					continue
				}
				off := int64(i) * partSize
				etag, err := s.uploadPart(ctx, key, id, i+1, r, off, min(partSize, size-off))
				if err != nil {
					once.Do(func() { firstErr = err; cancel() })
					continue
				}
				etags[i] = etag
			}
		})
	}
feed:
	for i := range nparts {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, &objstore.Error{Op: "put", Key: key, Err: err}
	}
	return etags, nil
}

// uploadPart hashes and sends one part; it is retried like a read (a part
// sent again replaces itself).
func (s *Store) uploadPart(ctx context.Context, key, id string, n int, r io.ReaderAt, off, size int64) (string, error) {
	hash, err := hashSection(r, off, size)
	if err != nil {
		return "", &objstore.Error{Op: "put", Key: key, Message: fmt.Sprintf("reading part %d", n), Err: err}
	}
	resp, err := s.do(ctx, &request{op: "put", key: key, method: http.MethodPut,
		path: s.objectPath(key), query: url.Values{"partNumber": {strconv.Itoa(n)}, "uploadId": {id}},
		body: r, off: off, size: size, hash: hash, retry: true})
	if err != nil {
		return "", err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	if etag == "" {
		return "", &objstore.Error{Op: "put", Key: key, Status: resp.StatusCode,
			Message: fmt.Sprintf("UploadPart %d answered no ETag", n)}
	}
	return normETag(etag), nil
}

// abort ends the upload id after err, so that no part of it is left (and
// billed). It runs even when ctx is done, for 30 s at most; an abort that
// fails is joined to err.
func (s *Store) abort(ctx context.Context, key, id string, err error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	resp, aerr := s.do(ctx, &request{op: "put", key: key, method: http.MethodDelete,
		path: s.objectPath(key), query: url.Values{"uploadId": {id}}, retry: true})
	if aerr != nil {
		var oe *objstore.Error
		if errors.As(aerr, &oe) && oe.Code == "NoSuchUpload" {
			return err // completed or aborted already
		}
		return errors.Join(err, fmt.Errorf("aborting the upload: %w", aerr))
	}
	resp.Body.Close()
	return err
}
