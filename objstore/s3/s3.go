package s3

import (
	"context"
	"crypto/tls"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/toolhost/toolhost/objstore"
)

// Options tunes a Store. The zero Options is an AWS S3 client with the
// defaults below.
type Options struct {
	// Kind is "s3" (AWS S3 and S3-compatible stores; the default) or
	// "r2" (Cloudflare R2: an endpoint is required, the region is "auto"
	// unless the credentials name one).
	Kind string
	// HTTPClient sends the requests; nil is a client of the Store's own.
	// The Store uses a copy that follows no redirect.
	HTTPClient *http.Client
	// PartSize is the size of a multipart upload's parts, and the largest
	// object sent in one PUT: 16 MiB by default, at least 5 MiB (S3's
	// smallest part) and at most 5 GiB. It grows when an object would
	// need more than 10,000 parts.
	PartSize int64
	// Concurrency is how many parts are uploaded at once (4 by default).
	Concurrency int
}

const (
	defaultPartSize    = 16 << 20
	minPartSize        = 5 << 20
	maxPartSize        = 5 << 30
	maxParts           = 10000
	defaultConcurrency = 4
	pageSize           = 1000
	maxRetries         = 3
)

// retryBase is the first retry's backoff; each next one is four times
// longer (100 ms, 400 ms, 1.6 s), with up to half of it added at random.
var retryBase = 100 * time.Millisecond

// Store is a bucket of AWS S3, Cloudflare R2 or an S3-compatible store. It
// implements objstore.Store and is safe for concurrent use.
type Store struct {
	kind, bucket, region string
	scheme, host         string
	basePath             string // the endpoint's path, without a trailing "/"
	pathStyle            bool   // the bucket is the path's first segment, not in the host

	client      *http.Client
	signer      *signer
	secrets     []string // the credential values scrub removes from a store's words
	partSize    int64
	concurrency int
	now         func() time.Time
}

var _ objstore.Store = (*Store)(nil)

var (
	regionRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	// vhostBucketRE is a bucket name that can be a DNS label of the
	// virtual host (a name with dots would not match S3's wildcard
	// certificate: those go path-style).
	vhostBucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$`)
)

// New returns the client of bucket, signing with creds' access key pair
// (and session token). Its errors name what is wrong, never a credential's
// value.
func New(bucket string, creds objstore.Credentials, o Options) (*Store, error) {
	kind := o.Kind
	if kind == "" {
		kind = "s3"
	}
	if kind != "s3" && kind != "r2" {
		return nil, fmt.Errorf("s3: unknown kind %q (want s3 or r2)", kind)
	}
	if bucket == "" || strings.ContainsAny(bucket, "/?#") || len(bucket) > 255 {
		return nil, fmt.Errorf("%s: %q is not a bucket name", kind, bucket)
	}
	if creds.AccessKeyID == "" {
		return nil, fmt.Errorf("%s: the credentials have no accessKeyId", kind)
	}
	if creds.SecretAccessKey == "" {
		return nil, fmt.Errorf("%s: the credentials have no secretAccessKey", kind)
	}
	s := &Store{
		kind:        kind,
		bucket:      bucket,
		region:      creds.Region,
		partSize:    o.PartSize,
		concurrency: o.Concurrency,
		now:         time.Now,
		secrets:     []string{creds.SecretAccessKey, creds.SessionToken, creds.AccessKeyID},
	}
	if s.region == "" {
		s.region = "us-east-1"
		if kind == "r2" {
			s.region = "auto"
		}
	}
	if !regionRE.MatchString(s.region) {
		return nil, fmt.Errorf("%s: %q is not a region", kind, s.region)
	}
	switch {
	case creds.Endpoint != "":
		u, err := parseEndpoint(creds.Endpoint)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kind, err)
		}
		s.scheme, s.host, s.basePath = u.Scheme, u.Host, strings.TrimRight(u.Path, "/")
		s.pathStyle = true
	case kind == "r2":
		return nil, errors.New("r2: the credentials have no endpoint (R2's is https://ACCOUNT_ID.r2.cloudflarestorage.com)")
	default:
		s.scheme, s.host = "https", "s3."+s.region+".amazonaws.com"
		if vhostBucketRE.MatchString(bucket) {
			s.host = bucket + "." + s.host
		} else {
			s.pathStyle = true
		}
	}

	if s.partSize <= 0 {
		s.partSize = defaultPartSize
	}
	s.partSize = min(max(s.partSize, minPartSize), maxPartSize)
	if s.concurrency <= 0 {
		s.concurrency = defaultConcurrency
	}
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if o.HTTPClient != nil {
		c := *o.HTTPClient
		c.CheckRedirect = noRedirect
		s.client = &c
	} else {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = s.concurrency + 2
		t.ResponseHeaderTimeout = 2 * time.Minute
		s.client = &http.Client{Transport: t, CheckRedirect: noRedirect}
	}
	s.signer = &signer{
		accessKey: creds.AccessKeyID, secretKey: creds.SecretAccessKey, token: creds.SessionToken,
		region: s.region, service: "s3",
	}
	return s, nil
}

// parseEndpoint checks an endpoint: an https:// URL, or http:// to a
// loopback address, with no user, query or fragment. Its errors show the
// host at most.
func parseEndpoint(endpoint string) (*url.URL, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return nil, errors.New("the endpoint is not a URL like https://host[:port]")
	}
	if u.User != nil {
		return nil, errors.New("the endpoint carries a user name or password: give them as the access key pair")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("the endpoint has a query or fragment")
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if !objstore.Loopback(u.Hostname()) {
			return nil, fmt.Errorf("the endpoint http://%s is refused: plain http:// only reaches a loopback address (127.0.0.0/8, ::1, localhost); use https://", u.Host)
		}
	default:
		return nil, fmt.Errorf("the endpoint's scheme %q is not https", u.Scheme)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	return u, nil
}

// bucketPath is the (unescaped) path of the bucket, objectPath that of an
// object.
func (s *Store) bucketPath() string {
	if s.pathStyle {
		return s.basePath + "/" + s.bucket
	}
	return s.basePath + "/"
}

func (s *Store) objectPath(key string) string {
	if s.pathStyle {
		return s.basePath + "/" + s.bucket + "/" + key
	}
	return s.basePath + "/" + key
}

// request is one S3 call.
type request struct {
	op, key string // what an error names
	method  string
	path    string // unescaped; sent and signed strictly encoded
	query   url.Values
	header  http.Header
	// body is read from off for size bytes, once per attempt; nil sends
	// none. hash is its hex SHA-256 (empty: that of no bytes).
	body      io.ReaderAt
	off, size int64
	hash      string
	// retry: the request may be sent again after a 5xx, a 429 or a
	// transport error.
	retry bool
}

// do sends rq, signed, retrying it when it may be, and returns a 2xx
// response. Any other status is an *objstore.Error made from the store's
// error document; a transport error is an *objstore.Error wrapping it.
func (s *Store) do(ctx context.Context, rq *request) (*http.Response, error) {
	u := &url.URL{
		Scheme:   s.scheme,
		Host:     s.host,
		Path:     rq.path,
		RawPath:  uriEncode(rq.path, false),
		RawQuery: canonicalQuery(rq.query),
	}
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, rq.method, "", nil)
		if err != nil {
			return nil, &objstore.Error{Op: rq.op, Key: rq.key, Err: err}
		}
		uc := *u
		req.URL, req.Host = &uc, u.Host
		for k, vs := range rq.header {
			req.Header[k] = append([]string(nil), vs...)
		}
		if rq.method == http.MethodGet {
			// The bytes as stored: no transparent gzip from the transport.
			req.Header.Set("Accept-Encoding", "identity")
		}
		if rq.body != nil && rq.size > 0 {
			body, off, size := rq.body, rq.off, rq.size
			req.Body = io.NopCloser(io.NewSectionReader(body, off, size))
			req.GetBody = func() (io.ReadCloser, error) {
				return io.NopCloser(io.NewSectionReader(body, off, size)), nil
			}
			req.ContentLength = size
		} else if rq.method == http.MethodPut || rq.method == http.MethodPost {
			req.Body, req.ContentLength = http.NoBody, 0
		}
		hash := rq.hash
		if hash == "" {
			hash = emptySHA256
		}
		s.signer.sign(req, hash, s.now())

		resp, err := s.client.Do(req)
		if err != nil {
			if ctx.Err() == nil && rq.retry && attempt < maxRetries && retryable(err) {
				if serr := sleep(ctx, attempt); serr == nil {
					continue
				}
			}
			return nil, &objstore.Error{Op: rq.op, Key: rq.key, Err: err}
		}
		if rq.retry && attempt < maxRetries &&
			(resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests) {
			io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
			resp.Body.Close()
			if err := sleep(ctx, attempt); err != nil {
				return nil, &objstore.Error{Op: rq.op, Key: rq.key, Err: err}
			}
			continue
		}
		if resp.StatusCode/100 != 2 {
			return nil, s.responseError(rq.op, rq.key, resp)
		}
		return resp, nil
	}
}

// retryable is a transport error worth another try: not a certificate
// the client refuses.
func retryable(err error) bool {
	var cv *tls.CertificateVerificationError
	return !errors.As(err, &cv)
}

// sleep waits before retry attempt+1, or until ctx is done.
func sleep(ctx context.Context, attempt int) error {
	d := retryBase << (2 * attempt)
	d += time.Duration(rand.Int64N(int64(d)/2 + 1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// listPage is one page of ListObjectsV2.
type listPage struct {
	IsTruncated           bool   `xml:"IsTruncated"`
	NextContinuationToken string `xml:"NextContinuationToken"`
	EncodingType          string `xml:"EncodingType"`
	Contents              []struct {
		Key          string `xml:"Key"`
		LastModified string `xml:"LastModified"`
		ETag         string `xml:"ETag"`
		Size         int64  `xml:"Size"`
	} `xml:"Contents"`
}

// List calls fn for each object under prefix, a page of 1,000 at a time
// (ListObjectsV2 with continuation tokens). Keys are asked for URL-encoded
// (encoding-type=url), so that a key holding a character XML 1.0 cannot
// carry still lists, and decoded when the store says it encoded them.
func (s *Store) List(ctx context.Context, prefix string, fn func(objstore.Object) error) error {
	token := ""
	for {
		page, err := s.listPage(ctx, prefix, token)
		if err != nil {
			return err
		}
		for _, c := range page.Contents {
			key := c.Key
			if page.EncodingType == "url" {
				if key, err = url.QueryUnescape(c.Key); err != nil {
					return &objstore.Error{Op: "list", Key: prefix, Message: "the store listed a key it did not encode: " + err.Error()}
				}
			}
			if !strings.HasPrefix(key, prefix) {
				continue // a store that ignored the prefix
			}
			mod, _ := time.Parse(time.RFC3339Nano, c.LastModified)
			if err := fn(objstore.Object{Key: key, Size: c.Size, Version: normETag(c.ETag), ModTime: mod}); err != nil {
				return err
			}
		}
		if !page.IsTruncated {
			return nil
		}
		if page.NextContinuationToken == "" || page.NextContinuationToken == token {
			return &objstore.Error{Op: "list", Key: prefix, Message: "the store answered a truncated page without a new continuation token"}
		}
		token = page.NextContinuationToken
	}
}

// listPage gets and reads one page, trying again (as do does) when the
// body breaks off.
func (s *Store) listPage(ctx context.Context, prefix, token string) (*listPage, error) {
	q := url.Values{"list-type": {"2"}, "max-keys": {fmt.Sprint(pageSize)}, "encoding-type": {"url"}}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if token != "" {
		q.Set("continuation-token", token)
	}
	for attempt := 0; ; attempt++ {
		resp, err := s.do(ctx, &request{op: "list", key: prefix, method: http.MethodGet,
			path: s.bucketPath(), query: q, retry: true})
		if err != nil {
			return nil, err
		}
		var page listPage
		err = xml.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err == nil {
			return &page, nil
		}
		var syn *xml.SyntaxError
		if ctx.Err() != nil || attempt >= maxRetries || errors.As(err, &syn) {
			return nil, &objstore.Error{Op: "list", Key: prefix, Status: resp.StatusCode,
				Message: "unreadable listing", Err: err}
		}
		if err := sleep(ctx, attempt); err != nil {
			return nil, &objstore.Error{Op: "list", Key: prefix, Err: err}
		}
	}
}

// Open gets the object key, streaming its body (nothing is buffered; ctx
// governs the reads too). With version set it sends If-Match, and checks
// the ETag answered too: a store that ignores If-Match on GET still never
// hands over another version than the one asked for. A body that breaks
// off is resumed (resumingBody).
func (s *Store) Open(ctx context.Context, key, version string) (io.ReadCloser, objstore.Object, error) {
	h := http.Header{}
	if version != "" {
		h.Set("If-Match", normETag(version))
	}
	resp, err := s.do(ctx, &request{op: "get", key: key, method: http.MethodGet,
		path: s.objectPath(key), header: h, retry: true})
	if err != nil {
		return nil, objstore.Object{}, err
	}
	obj := objectOf(key, resp)
	if version != "" && obj.Version != "" && !sameETag(obj.Version, version) {
		resp.Body.Close()
		return nil, objstore.Object{}, staleError(key, version, obj.Version)
	}
	return &resumingBody{s: s, ctx: ctx, key: key, etag: obj.Version, size: obj.Size, rc: resp.Body}, obj, nil
}

func staleError(key, want, got string) error {
	return &objstore.Error{Op: "get", Key: key,
		Message: "the store ignored If-Match " + normETag(want) + " and answered version " + got,
		Err:     objstore.ErrPrecondition}
}

// resumingBody is an object's body that picks up where it broke off: a
// read that fails mid-way (a reset connection) gets the rest with a
// ranged GET, If-Match the ETag first answered, so that the bytes joined
// are all of one version; maxRetries times at most.
type resumingBody struct {
	s         *Store
	ctx       context.Context
	key, etag string
	size      int64 // -1: unknown, no resuming
	rc        io.ReadCloser
	off       int64
	tries     int
}

func (b *resumingBody) Read(p []byte) (int, error) {
	for {
		n, err := b.rc.Read(p)
		b.off += int64(n)
		if err == nil || err == io.EOF || b.etag == "" || b.size < 0 || b.off >= b.size ||
			b.ctx.Err() != nil || b.tries >= maxRetries {
			return n, err
		}
		b.tries++
		b.rc.Close()
		b.rc = io.NopCloser(errReader{err})
		if serr := sleep(b.ctx, b.tries-1); serr != nil {
			return n, err
		}
		rc, rerr := b.rest()
		if rerr != nil {
			return n, rerr
		}
		b.rc = rc
		if n > 0 {
			return n, nil
		}
	}
}

// rest gets the body from b.off on.
func (b *resumingBody) rest() (io.ReadCloser, error) {
	resp, err := b.s.do(b.ctx, &request{op: "get", key: b.key, method: http.MethodGet,
		path: b.s.objectPath(b.key), retry: true, header: http.Header{
			"If-Match": {b.etag},
			"Range":    {fmt.Sprintf("bytes=%d-%d", b.off, b.size-1)},
		}})
	if err != nil {
		return nil, err
	}
	if v := normETag(resp.Header.Get("ETag")); v != "" && !sameETag(v, b.etag) {
		resp.Body.Close()
		return nil, staleError(b.key, b.etag, v)
	}
	if cr := resp.Header.Get("Content-Range"); resp.StatusCode != http.StatusPartialContent ||
		!strings.HasPrefix(cr, fmt.Sprintf("bytes %d-", b.off)) {
		resp.Body.Close()
		return nil, &objstore.Error{Op: "get", Key: b.key, Status: resp.StatusCode,
			Message: "the store did not answer the range that resumes the read"}
	}
	return resp.Body, nil
}

func (b *resumingBody) Close() error { return b.rc.Close() }

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// Head returns the object key as the store has it.
func (s *Store) Head(ctx context.Context, key string) (objstore.Object, error) {
	resp, err := s.do(ctx, &request{op: "head", key: key, method: http.MethodHead,
		path: s.objectPath(key), retry: true})
	if err != nil {
		return objstore.Object{}, err
	}
	resp.Body.Close()
	return objectOf(key, resp), nil
}

// Delete removes the object key, with If-Match when cond.IfMatch is set
// (cond.IfNoneMatch means nothing to a delete and is not sent).
// S3 answers 204 whether or not the key was there: Delete then succeeds
// (no Head is spent to tell); a store that answers 404 is ErrNotFound.
// An unconditional delete is retried like a read; a conditional one is
// not (a retry after a lost answer would be refused for the delete it
// made).
func (s *Store) Delete(ctx context.Context, key string, cond objstore.Condition) error {
	h := http.Header{}
	if cond.IfMatch != "" {
		h.Set("If-Match", normETag(cond.IfMatch))
	}
	resp, err := s.do(ctx, &request{op: "delete", key: key, method: http.MethodDelete,
		path: s.objectPath(key), header: h, retry: cond.IfMatch == ""})
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	return nil
}

// objectOf is the object a GET or HEAD response describes.
func objectOf(key string, resp *http.Response) objstore.Object {
	obj := objstore.Object{Key: key, Size: resp.ContentLength, Version: normETag(resp.Header.Get("ETag"))}
	if t, err := http.ParseTime(resp.Header.Get("Last-Modified")); err == nil {
		obj.ModTime = t
	}
	return obj
}

// normETag is an ETag in its quoted form, "…": the form S3 sends in
// headers and listings, and the one If-Match takes. A store that sent
// it bare has the quotes added, so that one object's Version is the same
// string whichever call reported it.
func normETag(etag string) string {
	etag = strings.TrimSpace(etag)
	if etag == "" || strings.HasPrefix(etag, "W/") {
		return etag
	}
	return `"` + strings.Trim(etag, `"`) + `"`
}

// sameETag compares two ETags quoted or not.
func sameETag(a, b string) bool {
	return strings.Trim(strings.TrimPrefix(a, "W/"), `"`) == strings.Trim(strings.TrimPrefix(b, "W/"), `"`)
}
