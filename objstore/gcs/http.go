package gcs

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/objstore"
)

// maxErrorBody bounds what is read of an error's body, maxObjectBody of
// an object resource.
const (
	maxErrorBody  = 64 << 10
	maxObjectBody = 1 << 20
)

// retryPolicy bounds the attempts at one request and the waits between
// them.
type retryPolicy struct {
	attempts int           // in all, the first included
	base     time.Duration // the first wait; each next one doubles
	max      time.Duration // the longest wait, Retry-After included
}

var defaultRetry = retryPolicy{attempts: 4, base: 250 * time.Millisecond, max: 4 * time.Second}

// wait is the pause before attempt n+1 (n ≥ 1): base·2ⁿ⁻¹ with jitter,
// or what the server asked for with Retry-After, at most max.
func (p retryPolicy) wait(n int, resp *http.Response) time.Duration {
	if resp != nil {
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs >= 0 {
			return min(time.Duration(secs)*time.Second, p.max)
		}
	}
	d := p.base << (n - 1)
	if d <= 0 || d > p.max {
		d = p.max
	}
	// Full jitter on the upper half, so that clients retrying together
	// spread out.
	return d/2 + rand.N(d/2+1)
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// call is one request of the API, which do may send more than once.
type call struct {
	op, key string
	method  string
	url     string
	header  http.Header
	// body returns the request's body afresh for each attempt; nil is
	// none. length is its length.
	body   func() io.Reader
	length int64
	// idempotent requests are retried on a 5xx, a 429 and any failure of
	// the connection; others only where nothing was sent (a failed dial).
	idempotent bool
	// noAuth sends no Authorization header (an upload session on
	// another origin than the endpoint's).
	noAuth bool
	// noRetry sends it once: its caller retries in a way of its own.
	noRetry bool

	// ambiguous is set by do when an attempt before the last may have
	// reached the server and taken effect.
	ambiguous bool
}

func (s *Store) newRequest(ctx context.Context, c *call) (*http.Request, error) {
	var body io.Reader
	if c.body != nil && c.length > 0 {
		body = c.body()
	}
	req, err := http.NewRequestWithContext(ctx, c.method, c.url, body)
	if err != nil {
		return nil, &objstore.Error{Op: c.op, Key: c.key, Message: "building the request", Err: unwrapURLError(err)}
	}
	if body != nil {
		req.ContentLength = c.length
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(c.body()), nil }
	} else if c.method == http.MethodPut || c.method == http.MethodPost {
		// An explicit Content-Length: 0, which GCS wants of a body-less
		// POST and PUT.
		req.Body = http.NoBody
		req.ContentLength = 0
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	if s.token != "" && !c.noAuth {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	req.Header.Set("User-Agent", "toolhost-objstore-gcs")
	return req, nil
}

// do sends c, retrying as c allows, and returns the last answer whatever
// its status; the caller closes its body. A failure to reach the server is
// an *objstore.Error wrapping the transport's error.
func (s *Store) do(ctx context.Context, c *call) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		req, err := s.newRequest(ctx, c)
		if err != nil {
			return nil, err
		}
		resp, err := s.client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, s.transportError(c, ctx.Err())
			}
			retry := !c.noRetry && (c.idempotent || isDialError(err))
			if !isDialError(err) {
				c.ambiguous = true
			}
			if !retry || attempt >= s.retry.attempts {
				return nil, s.transportError(c, err)
			}
			if err := sleep(ctx, s.retry.wait(attempt, nil)); err != nil {
				return nil, s.transportError(c, err)
			}
			continue
		}
		if retryableStatus(resp.StatusCode) && c.idempotent && !c.noRetry && attempt < s.retry.attempts {
			c.ambiguous = true
			d := s.retry.wait(attempt, resp)
			drain(resp)
			if err := sleep(ctx, d); err != nil {
				return nil, s.transportError(c, err)
			}
			continue
		}
		return resp, nil
	}
}

// retryableStatus is a status GCS asks clients to retry: 408, 429 and 5xx.
func retryableStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500 && code <= 599
}

// isDialError is a failure before any byte of the request was sent.
func isDialError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// unwrapURLError drops the *url.Error around a transport's error: its
// message quotes the URL, and an upload session's URL is a capability.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// transportError is a request that got no answer.
func (s *Store) transportError(c *call, err error) error {
	err = unwrapURLError(err)
	if s.token != "" && strings.Contains(err.Error(), s.token) {
		err = redacted{err, s.token}
	}
	return &objstore.Error{Op: c.op, Key: c.key, Err: err}
}

// redacted is an error whose message has the token blanked out.
type redacted struct {
	err   error
	token string
}

func (r redacted) Error() string { return strings.ReplaceAll(r.err.Error(), r.token, "[redacted]") }
func (r redacted) Unwrap() error { return r.err }

// drain reads a little of an answer's body, so that its connection can be
// reused, and closes it.
func drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
}

// apiError is the JSON API's error body.
type apiError struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Errors  []struct {
			Reason  string `json:"reason"`
			Message string `json:"message"`
		} `json:"errors"`
	} `json:"error"`
}

// statusError turns an answer that is not a success into an
// *objstore.Error with the server's reason and message, wrapping the
// sentinel its status calls for, and closes its body.
func (s *Store) statusError(c *call, resp *http.Response) error {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &objstore.Error{Op: c.op, Key: c.key, Status: resp.StatusCode}
	var a apiError
	if json.Unmarshal(b, &a) == nil && (a.Error.Message != "" || len(a.Error.Errors) > 0) {
		e.Message = a.Error.Message
		if len(a.Error.Errors) > 0 {
			e.Code = a.Error.Errors[0].Reason
			if e.Message == "" {
				e.Message = a.Error.Errors[0].Message
			}
		}
	} else {
		// Not the JSON API's error (a proxy's page, an emulator's plain
		// text): its first line, if short.
		msg := strings.TrimSpace(string(b))
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		if len(msg) > 300 || strings.HasPrefix(msg, "<") {
			msg = ""
		}
		e.Message = msg
	}
	if s.token != "" {
		e.Code = strings.ReplaceAll(e.Code, s.token, "[redacted]")
		e.Message = strings.ReplaceAll(e.Message, s.token, "[redacted]")
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		e.Err = objstore.ErrAuth
	case http.StatusNotFound:
		// GCS says "The specified bucket does not exist." of a missing
		// bucket whatever the request; a listing's 404 is its bucket, and
		// so is an upload's (sessions that are gone are told apart
		// before).
		if c.op == "list" || c.op == "put" || strings.Contains(strings.ToLower(e.Message), "bucket does not exist") {
			e.Err = objstore.ErrNoBucket
		} else {
			e.Err = objstore.ErrNotFound
		}
	case http.StatusPreconditionFailed:
		e.Err = objstore.ErrPrecondition
	}
	if e.Message == "" && e.Code == "" && e.Err == nil {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}
