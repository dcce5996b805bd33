package gcs

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/toolhost/toolhost/objstore"
)

// Put writes size bytes of r as the object key if cond holds: IfMatch is
// sent as ifGenerationMatch=<generation>, IfNoneMatch as
// ifGenerationMatch=0. Objects up to the chunk size go up in one request
// (uploadType=media); larger ones in a resumable upload, a chunk at a time,
// each read from r by a section reader as it is sent. It returns the object
// written, whose Version is its new generation.
func (s *Store) Put(ctx context.Context, key string, r io.ReaderAt, size int64, cond objstore.Condition) (objstore.Object, error) {
	if err := checkKey("put", key); err != nil {
		return objstore.Object{}, err
	}
	if size < 0 {
		return objstore.Object{}, &objstore.Error{Op: "put", Key: key, Message: fmt.Sprintf("a size of %d bytes", size)}
	}
	q := url.Values{"name": {key}}
	if err := setCondition(q, "put", key, cond); err != nil {
		return objstore.Object{}, err
	}
	var obj objstore.Object
	var err error
	if size <= s.chunk {
		obj, err = s.putSimple(ctx, key, r, size, q)
	} else {
		obj, err = s.putResumable(ctx, key, r, size, q)
	}
	if err == nil && obj.Size != size {
		return obj, &objstore.Error{Op: "put", Key: key, Message: fmt.Sprintf("the server stored %d bytes of %d", obj.Size, size)}
	}
	return obj, err
}

// putSimple is a single-request media upload.
func (s *Store) putSimple(ctx context.Context, key string, r io.ReaderAt, size int64, q url.Values) (objstore.Object, error) {
	q.Set("uploadType", "media")
	q.Set("fields", objectFields)
	c := &call{
		op: "put", key: key, method: http.MethodPost, url: s.uploadURL(q),
		header: http.Header{"Content-Type": {"application/octet-stream"}},
		body:   func() io.Reader { return io.NewSectionReader(r, 0, size) }, length: size,
		// A conditional write cannot overwrite what another wrote in
		// between; an unconditional one could, so it is not retried
		// once it may have reached the server.
		idempotent: q.Has("ifGenerationMatch"),
	}
	resp, err := s.do(ctx, c)
	if err != nil {
		return objstore.Object{}, err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return objstore.Object{}, s.statusError(c, resp)
	}
	return s.decodeObject(c, resp)
}

// putResumable starts a resumable upload session and sends the object to
// it a chunk at a time. After a chunk that fails (no answer, 408, 429,
// 5xx) it waits, asks the session how much it holds (an empty PUT with
// Content-Range: bytes */size) and goes on from there, up to the retry
// policy's attempts in a row. A session that does not complete is
// cancelled.
func (s *Store) putResumable(ctx context.Context, key string, r io.ReaderAt, size int64, q url.Values) (objstore.Object, error) {
	q.Set("uploadType", "resumable")
	start := &call{
		op: "put", key: key, method: http.MethodPost, url: s.uploadURL(q),
		header: http.Header{
			"X-Upload-Content-Type":   {"application/octet-stream"},
			"X-Upload-Content-Length": {strconv.FormatInt(size, 10)},
		},
		// Starting a session writes nothing.
		idempotent: true,
	}
	resp, err := s.do(ctx, start)
	if err != nil {
		return objstore.Object{}, err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return objstore.Object{}, s.statusError(start, resp)
	}
	drain(resp)
	session, err := resp.Request.URL.Parse(resp.Header.Get("Location"))
	switch {
	case resp.Header.Get("Location") == "" || err != nil:
		return objstore.Object{}, &objstore.Error{Op: "put", Key: key, Status: resp.StatusCode, Message: "the server started no upload session (no Location)"}
	case session.Scheme != "https" && !(session.Scheme == "http" && objstore.Loopback(session.Hostname())):
		return objstore.Object{}, &objstore.Error{Op: "put", Key: key, Status: resp.StatusCode, Message: "the upload session is not on an https:// or loopback http:// URL"}
	}
	// The session's URL is a capability of its own: the token goes only
	// to the endpoint's origin.
	noAuth := session.Scheme != s.base.Scheme || session.Host != s.base.Host
	sessionCall := func(header http.Header) *call {
		header.Set("X-GUploader-No-308", "yes")
		return &call{op: "put", key: key, method: http.MethodPut, url: session.String(), header: header, noAuth: noAuth, noRetry: true}
	}

	done := false
	defer func() {
		if !done {
			s.cancelUpload(ctx, sessionCall(http.Header{}))
		}
	}()

	var (
		off    int64 // the bytes the session holds, as it last said
		query  bool  // ask the session where it is before sending more
		fails  int   // failed requests since the session last grew
		stalls int   // chunks sent in a row that the session kept none of
	)
	for {
		var c *call
		if query {
			c = sessionCall(http.Header{"Content-Range": {"bytes */" + strconv.FormatInt(size, 10)}})
		} else {
			from, n := off, min(s.chunk, size-off)
			c = sessionCall(http.Header{"Content-Range": {fmt.Sprintf("bytes %d-%d/%d", from, from+n-1, size)}})
			c.body = func() io.Reader { return io.NewSectionReader(r, from, n) }
			c.length = n
		}
		resp, err := s.do(ctx, c)
		if err == nil && !retryableStatus(resp.StatusCode) {
			switch {
			case resp.Header.Get("X-Http-Status-Code-Override") == "308" || resp.StatusCode == http.StatusPermanentRedirect:
				next, perr := persisted(resp.Header.Get("Range"))
				drain(resp)
				if perr == nil && next > size {
					perr = fmt.Errorf("%d bytes of %d", next, size)
				}
				if perr != nil {
					return objstore.Object{}, &objstore.Error{Op: "put", Key: key, Status: resp.StatusCode, Message: "the upload session answered a range it cannot hold: " + perr.Error()}
				}
				if !query && next <= off {
					if stalls++; stalls >= s.retry.attempts {
						return objstore.Object{}, &objstore.Error{Op: "put", Key: key, Status: resp.StatusCode, Message: fmt.Sprintf("the upload session kept none of %d chunks in a row", stalls)}
					}
				}
				if next > off {
					// Progress: the failures before it do not count.
					stalls, fails = 0, 0
				}
				off, query = next, false
				continue
			case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated:
				done = true
				return s.decodeObject(c, resp)
			case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
				drain(resp)
				done = true // nothing left to cancel
				return objstore.Object{}, &objstore.Error{Op: "put", Key: key, Status: resp.StatusCode, Message: "the upload session is gone (expired or cancelled)"}
			default:
				return objstore.Object{}, s.statusError(c, resp)
			}
		}
		// No answer, or one to retry.
		if err != nil && ctx.Err() != nil {
			return objstore.Object{}, err
		}
		fails++
		var wait time.Duration
		if err == nil {
			wait = s.retry.wait(fails, resp)
			err = s.statusError(c, resp)
		} else {
			wait = s.retry.wait(fails, nil)
		}
		if fails >= s.retry.attempts {
			return objstore.Object{}, err
		}
		if serr := sleep(ctx, wait); serr != nil {
			return objstore.Object{}, s.transportError(c, serr)
		}
		query = true
	}
}

// persisted reads a session's Range header, "bytes=0-N", as the N+1 bytes
// it holds; none is 0.
func persisted(h string) (int64, error) {
	if h == "" {
		return 0, nil
	}
	from, to, ok := strings.Cut(strings.TrimPrefix(h, "bytes="), "-")
	if !ok || from != "0" {
		return 0, fmt.Errorf("Range %.60q", h)
	}
	n, err := strconv.ParseInt(to, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("Range %.60q", h)
	}
	return n + 1, nil
}

// cancelUpload ends an upload session that will not complete (GCS answers
// 499), even when ctx is done, so that the bytes it holds are dropped at
// once rather than in a week.
func (s *Store) cancelUpload(ctx context.Context, c *call) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	c.method = http.MethodDelete
	c.header.Del("Content-Range")
	if resp, err := s.do(ctx, c); err == nil {
		drain(resp)
	}
}
