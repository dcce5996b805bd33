package azblob

import (
	"context"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/toolhost/toolhost/objstore"
)

const (
	// attempts is how many times a request is sent, at most: once, and
	// again after a 5xx answer or a connection that broke.
	attempts = 4
	// backoff is the wait before the first retry; it doubles for each
	// next, with jitter.
	backoff = 200 * time.Millisecond
	// errorBodyLimit bounds the error body read from a response.
	errorBodyLimit = 64 << 10
)

// call is one request to the service, which do may send more than once.
type call struct {
	op, key string // for errors: the Store's method, and the key or prefix
	method  string
	// blob addresses the blob key; otherwise the container.
	blob   bool
	query  [][2]string // the operation's own parameters, unescaped
	header http.Header // its own headers, besides x-ms-date and x-ms-version
	// body, when set, returns the request's body afresh for each
	// attempt; size is its length.
	body func() io.Reader
	size int64
}

// do sends c, again after a 5xx answer (but 501 and 505) or a broken
// connection, attempts times at most, and returns the first response
// with a 2xx status; the caller closes its body. Any other answer is an
// *objstore.Error with the service's code and message.
func (s *Store) do(ctx context.Context, c *call) (*http.Response, error) {
	wait := backoff
	for try := 1; ; try++ {
		resp, err := s.send(ctx, c)
		if err != nil {
			if try < attempts && retryable(ctx, err) && sleep(ctx, &wait) {
				continue
			}
			return nil, s.transportError(c, err)
		}
		if resp.StatusCode/100 == 2 {
			return resp, nil
		}
		if try < attempts && retryStatus(resp.StatusCode) {
			io.Copy(io.Discard, io.LimitReader(resp.Body, errorBodyLimit))
			resp.Body.Close()
			if sleep(ctx, &wait) {
				continue
			}
			return nil, s.transportError(c, ctx.Err())
		}
		return nil, s.refusal(c, resp)
	}
}

// send builds, signs and sends one attempt of c.
func (s *Store) send(ctx context.Context, c *call) (*http.Response, error) {
	path := s.base + "/" + escapePath(s.container)
	if c.blob {
		path += "/" + escapePath(c.key)
	}
	var q strings.Builder
	for _, p := range c.query {
		if q.Len() > 0 {
			q.WriteByte('&')
		}
		q.WriteString(escapeQuery(p[0]))
		q.WriteByte('=')
		q.WriteString(escapeQuery(p[1]))
	}
	if s.sas != "" {
		if q.Len() > 0 {
			q.WriteByte('&')
		}
		q.WriteString(s.sas)
	}
	unescaped, err := url.PathUnescape(path)
	if err != nil {
		return nil, err
	}
	u := &url.URL{Scheme: s.scheme, Host: s.host, Path: unescaped, RawPath: path, RawQuery: q.String()}
	req, err := http.NewRequestWithContext(ctx, c.method, "", nil)
	if err != nil {
		return nil, err
	}
	req.URL, req.Host = u, u.Host
	for k, vs := range c.header {
		req.Header[k] = vs
	}
	if c.body != nil {
		req.ContentLength = c.size
		if c.size > 0 {
			req.Body = io.NopCloser(c.body())
		} else {
			req.Body = http.NoBody
		}
	}
	req.Header.Set("x-ms-version", apiVersion)
	req.Header.Set("x-ms-date", time.Now().UTC().Format(http.TimeFormat))
	if s.key != nil {
		req.Header.Set("Authorization", "SharedKey "+s.account+":"+signature(s.key, stringToSign(req, s.account)))
	}
	return s.client.Do(req)
}

// retryStatus says whether an answer with status may be a passing fault
// of the service (500 InternalError and OperationTimedOut, 503
// ServerBusy, a gateway's 502 and 504).
func retryStatus(status int) bool {
	return status >= 500 && status != http.StatusNotImplemented && status != http.StatusHTTPVersionNotSupported
}

// retryable says whether err, from sending a request, is a connection
// that broke or timed out, rather than the caller's context or a
// refusal to connect at all.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var ne net.Error
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.As(err, &ne) && ne.Timeout()
}

// sleep waits *wait, give or take a quarter, and doubles it; false says
// ctx ended first.
func sleep(ctx context.Context, wait *time.Duration) bool {
	d := *wait - *wait/4 + rand.N(*wait/2+1)
	*wait *= 2
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// transportError is the *objstore.Error of a request that got no
// answer. A *url.Error's text holds the request's URL, and with it a SAS
// token: only the error inside it is kept.
func (s *Store) transportError(c *call, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if msg := err.Error(); s.redact(msg) != msg {
		err = &redacted{msg: s.redact(msg), err: err}
	}
	return &objstore.Error{Op: c.op, Key: c.key, Err: err}
}

// redacted is an error whose text held a secret: its text is without
// it, and errors.Is still sees what it wraps.
type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }

// serviceError is the body of the service's refusals.
type serviceError struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

// refusal is the *objstore.Error of resp, an answer other than 2xx, which
// it closes: the service's code (from x-ms-error-code, or the body's, a
// HEAD having none) and message, without the RequestId and Time lines
// the service adds to it, and the sentinel the status and code mean.
func (s *Store) refusal(c *call, resp *http.Response) error {
	defer resp.Body.Close()
	e := &objstore.Error{Op: c.op, Key: c.key, Status: resp.StatusCode, Code: resp.Header.Get("x-ms-error-code")}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyLimit))
	var se serviceError
	if xml.Unmarshal(body, &se) == nil {
		if se.Code != "" {
			e.Code = se.Code
		}
		e.Message = message(se.Message)
	}
	if e.Message == "" && resp.StatusCode/100 == 3 {
		e.Message = "the service redirected the request, which the client does not follow"
	}
	e.Code, e.Message = s.redact(e.Code), s.redact(e.Message)
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		e.Err = objstore.ErrAuth
	case resp.StatusCode == http.StatusPreconditionFailed:
		e.Err = objstore.ErrPrecondition
	case resp.StatusCode == http.StatusConflict && e.Code == "BlobAlreadyExists":
		// If-None-Match: * on a blob that exists.
		e.Err = objstore.ErrPrecondition
	case resp.StatusCode == http.StatusNotFound && e.Code == "ContainerNotFound":
		e.Err = objstore.ErrNoBucket
	case resp.StatusCode == http.StatusNotFound && e.Code == "" && c.op == "list":
		e.Err = objstore.ErrNoBucket
	case resp.StatusCode == http.StatusNotFound:
		e.Err = objstore.ErrNotFound
	}
	return e
}

// message is the service's message without the lines it adds to every
// one ("RequestId:…", "Time:…").
func message(m string) string {
	var keep []string
	for _, line := range strings.Split(m, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "RequestId:") || strings.HasPrefix(line, "Time:") {
			continue
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, " ")
}

// redact removes the account key, the SAS token and its signature from
// text that came from elsewhere (the service, the transport), should it
// hold them. The key signs and is never sent, so no answer should hold
// it; the SAS is in every request's query.
func (s *Store) redact(text string) string {
	var secrets []string
	if s.key != nil {
		secrets = append(secrets, base64.StdEncoding.EncodeToString(s.key))
	}
	if s.sas != "" {
		secrets = append(secrets, s.sas)
		if q, err := url.ParseQuery(s.sas); err == nil {
			if sig := q.Get("sig"); sig != "" {
				secrets = append(secrets, sig, url.QueryEscape(sig), escapeQuery(sig))
			}
		}
	}
	for _, secret := range secrets {
		text = strings.ReplaceAll(text, secret, "[redacted]")
	}
	return text
}
