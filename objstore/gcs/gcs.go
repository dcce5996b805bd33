package gcs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/toolhost/toolhost/objstore"
)

// DefaultEndpoint is where the JSON API is served when the credentials name
// no endpoint.
const DefaultEndpoint = "https://storage.googleapis.com"

// DefaultChunkSize is the chunk of a resumable upload when Options gives
// none: objects up to this size go up in one request.
const DefaultChunkSize = 16 << 20

// ChunkUnit is what a resumable upload's chunk size is a multiple of, as GCS
// requires of every chunk but the last.
const ChunkUnit = 256 << 10

// pageSize is the number of objects a list page asks for (the API's
// maximum).
const pageSize = 1000

// objectFields are the fields of an object resource the client reads; the
// server sends no others.
const objectFields = "name,size,generation,updated"

// Options tunes a Store. The zero Options is the defaults.
type Options struct {
	// HTTPClient sends the requests; nil is a client of its own over
	// http.DefaultTransport. Its CheckRedirect is replaced: the store
	// never follows a redirect.
	HTTPClient *http.Client
	// ChunkSize is the chunk of a resumable upload, a multiple of
	// ChunkUnit (256 KiB); 0 is DefaultChunkSize (16 MiB). Objects up to
	// it go up in a single request.
	ChunkSize int64
}

// Store is a bucket of Google Cloud Storage, reached through the JSON API.
// It implements objstore.Store; its methods are safe for concurrent use.
type Store struct {
	bucket string
	// base is the endpoint: scheme, host and path prefix, without a
	// trailing slash.
	base   *url.URL
	token  string
	client *http.Client
	chunk  int64
	retry  retryPolicy
}

var _ objstore.Store = (*Store)(nil)

// New returns the bucket named bucket, reached with creds: creds.Endpoint
// (DefaultEndpoint when empty) and creds.SessionToken, an OAuth 2 access
// token sent as a bearer token (none: requests go unauthenticated). The
// other fields of creds are not used. An http:// endpoint is refused unless
// its host is a loopback address or localhost.
func New(bucket string, creds objstore.Credentials, o Options) (*Store, error) {
	if err := checkBucket(bucket); err != nil {
		return nil, err
	}
	endpoint := creds.Endpoint
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	base, err := parseEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	if err := checkToken(creds.SessionToken); err != nil {
		return nil, err
	}
	chunk := o.ChunkSize
	switch {
	case chunk == 0:
		chunk = DefaultChunkSize
	case chunk < 0 || chunk%ChunkUnit != 0:
		return nil, fmt.Errorf("gcs: chunk size %d is not a positive multiple of %d", chunk, ChunkUnit)
	}
	var client http.Client
	if o.HTTPClient != nil {
		client = *o.HTTPClient
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Store{
		bucket: bucket,
		base:   base,
		token:  creds.SessionToken,
		client: &client,
		chunk:  chunk,
		retry:  defaultRetry,
	}, nil
}

// checkBucket accepts the names GCS gives buckets: lower-case letters,
// digits, '-', '_' and '.', 3 to 222 characters.
func checkBucket(b string) error {
	if len(b) < 3 || len(b) > 222 {
		return fmt.Errorf("gcs: bucket name %q is not 3 to 222 characters long", b)
	}
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("gcs: bucket name %q holds %q: a bucket's name has lower-case letters, digits, '-', '_' and '.'", b, c)
		}
	}
	return nil
}

// parseEndpoint checks an endpoint and returns it without a trailing slash
// or a trailing /storage/v1 (the form some clients are configured with).
func parseEndpoint(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		// url's errors quote the whole string, which may hold a password.
		return nil, errors.New("gcs: the endpoint is not a URL")
	}
	if u.User != nil {
		return nil, errors.New("gcs: the endpoint carries user information; credentials go in the secret's sessionToken")
	}
	if u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("gcs: endpoint %q is not an http:// or https:// URL with a host", s)
	}
	if u.Scheme == "http" && !objstore.Loopback(u.Hostname()) {
		return nil, fmt.Errorf("gcs: endpoint %q is plain http:// to a host that is not loopback; use https://", s)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		// Not quoted: a query may hold a key.
		return nil, errors.New("gcs: the endpoint has a query or fragment; give its scheme, host and path alone")
	}
	p := strings.TrimRight(u.EscapedPath(), "/")
	p = strings.TrimSuffix(p, "/storage/v1")
	return &url.URL{Scheme: u.Scheme, Host: u.Host, Path: p}, nil
}

// checkToken refuses a token that cannot go in a header, without saying
// what it holds.
func checkToken(t string) error {
	for i := 0; i < len(t); i++ {
		if c := t[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("gcs: the session token holds a character (at byte %d) that cannot be sent in a header", i)
		}
	}
	return nil
}

// escape percent-encodes every byte of s but the unreserved characters of
// RFC 3986, as a path segment of the JSON API must be ('/' as %2F).
func escape(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// endpointURL is the endpoint with path (already escaped) and query.
func (s *Store) endpointURL(path string, q url.Values) string {
	u := s.base.String() + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

func (s *Store) objectsURL(q url.Values) string {
	return s.endpointURL("/storage/v1/b/"+escape(s.bucket)+"/o", q)
}

func (s *Store) objectURL(key string, q url.Values) string {
	return s.endpointURL("/storage/v1/b/"+escape(s.bucket)+"/o/"+escape(key), q)
}

func (s *Store) uploadURL(q url.Values) string {
	return s.endpointURL("/upload/storage/v1/b/"+escape(s.bucket)+"/o", q)
}

// objectResource is the part of the API's object resource the client reads.
type objectResource struct {
	Name       string  `json:"name"`
	Size       flexInt `json:"size"`
	Generation flexInt `json:"generation"`
	Updated    string  `json:"updated"`
}

// flexInt is an int64 the API sends as a decimal string (as it does every
// int64); a bare number is accepted too.
type flexInt struct {
	v   int64
	set bool
}

func (f *flexInt) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "null" || s == "" {
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("not an integer: %.40q", s)
	}
	f.v, f.set = v, true
	return nil
}

func (r objectResource) object() objstore.Object {
	o := objstore.Object{Key: r.Name, Size: r.Size.v}
	if r.Generation.set {
		o.Version = strconv.FormatInt(r.Generation.v, 10)
	}
	if t, err := time.Parse(time.RFC3339Nano, r.Updated); err == nil {
		o.ModTime = t
	}
	return o
}

// List calls fn for every object whose name begins with prefix, a page of
// up to 1,000 at a time, in the order GCS lists them (ascending by name).
func (s *Store) List(ctx context.Context, prefix string, fn func(objstore.Object) error) error {
	token := ""
	for {
		q := url.Values{}
		if prefix != "" {
			q.Set("prefix", prefix)
		}
		if token != "" {
			q.Set("pageToken", token)
		}
		q.Set("maxResults", strconv.Itoa(pageSize))
		q.Set("projection", "noAcl")
		q.Set("fields", "items("+objectFields+"),nextPageToken")
		c := &call{op: "list", key: prefix, method: http.MethodGet, url: s.objectsURL(q), idempotent: true}
		resp, err := s.do(ctx, c)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return s.statusError(c, resp)
		}
		var page struct {
			Items         []objectResource `json:"items"`
			NextPageToken string           `json:"nextPageToken"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return &objstore.Error{Op: "list", Key: prefix, Status: resp.StatusCode, Message: "reading a page of the listing: " + err.Error()}
		}
		for _, it := range page.Items {
			if err := fn(it.object()); err != nil {
				return err
			}
		}
		if page.NextPageToken == "" {
			return nil
		}
		if page.NextPageToken == token {
			return &objstore.Error{Op: "list", Key: prefix, Status: resp.StatusCode, Message: "the server answered the same page token twice"}
		}
		token = page.NextPageToken
	}
}

// Open downloads the object key (alt=media), streaming its bytes. With
// version set, the request carries ifGenerationMatch=version, and the
// generation the server answers with (x-goog-generation) is checked too:
// either refusal is ErrPrecondition. The bytes are the stored ones: a
// gzip-encoded object is not decompressed.
func (s *Store) Open(ctx context.Context, key, version string) (io.ReadCloser, objstore.Object, error) {
	if err := checkKey("get", key); err != nil {
		return nil, objstore.Object{}, err
	}
	q := url.Values{"alt": {"media"}}
	if version != "" {
		if err := checkGeneration("get", key, version); err != nil {
			return nil, objstore.Object{}, err
		}
		q.Set("ifGenerationMatch", version)
	}
	c := &call{op: "get", key: key, method: http.MethodGet, url: s.objectURL(key, q), idempotent: true,
		// Asked for by hand, so that the transport does not decompress
		// an object stored gzip-encoded, nor GCS transcode it.
		header: http.Header{"Accept-Encoding": {"gzip"}}}
	resp, err := s.do(ctx, c)
	if err != nil {
		return nil, objstore.Object{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, objstore.Object{}, s.statusError(c, resp)
	}
	obj := objstore.Object{Key: key, Version: resp.Header.Get("X-Goog-Generation"), Size: resp.ContentLength}
	if n, err := strconv.ParseInt(resp.Header.Get("X-Goog-Stored-Content-Length"), 10, 64); err == nil {
		obj.Size = n
	}
	if t, err := http.ParseTime(resp.Header.Get("Last-Modified")); err == nil {
		obj.ModTime = t
	}
	if version != "" && obj.Version != "" && obj.Version != version {
		resp.Body.Close()
		return nil, objstore.Object{}, &objstore.Error{Op: "get", Key: key, Status: resp.StatusCode,
			Message: "the server sent generation " + obj.Version + ", not " + version, Err: objstore.ErrPrecondition}
	}
	if obj.Version == "" {
		obj.Version = version
	}
	return resp.Body, obj, nil
}

// Head reads the object's metadata.
func (s *Store) Head(ctx context.Context, key string) (objstore.Object, error) {
	if err := checkKey("head", key); err != nil {
		return objstore.Object{}, err
	}
	c := &call{op: "head", key: key, method: http.MethodGet, url: s.objectURL(key, url.Values{"fields": {objectFields}}), idempotent: true}
	resp, err := s.do(ctx, c)
	if err != nil {
		return objstore.Object{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return objstore.Object{}, s.statusError(c, resp)
	}
	return s.decodeObject(c, resp)
}

// Delete removes the live object key; cond.IfMatch is sent as
// ifGenerationMatch (cond.IfNoneMatch as ifGenerationMatch=0, which no
// object has).
func (s *Store) Delete(ctx context.Context, key string, cond objstore.Condition) error {
	if err := checkKey("delete", key); err != nil {
		return err
	}
	q := url.Values{}
	if err := setCondition(q, "delete", key, cond); err != nil {
		return err
	}
	// A delete is idempotent when it is conditional: a retry cannot
	// remove an object written since.
	c := &call{op: "delete", key: key, method: http.MethodDelete, url: s.objectURL(key, q), idempotent: len(q) > 0}
	resp, err := s.do(ctx, c)
	if err != nil {
		return err
	}
	switch {
	case resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusOK:
		drain(resp)
		return nil
	case resp.StatusCode == http.StatusNotFound && c.ambiguous:
		// An earlier attempt may have removed it: the object is gone
		// either way, as asked.
		drain(resp)
		return nil
	}
	return s.statusError(c, resp)
}

func checkKey(op, key string) error {
	if key == "" {
		return &objstore.Error{Op: op, Key: key, Message: "an object's name cannot be empty"}
	}
	return nil
}

// checkGeneration accepts a version that is a generation: a decimal number.
func checkGeneration(op, key, v string) error {
	if _, err := strconv.ParseUint(v, 10, 63); err != nil {
		return &objstore.Error{Op: op, Key: key, Message: fmt.Sprintf("version %.40q is not a GCS generation", v)}
	}
	return nil
}

// setCondition adds cond's query parameters to q.
func setCondition(q url.Values, op, key string, cond objstore.Condition) error {
	switch {
	case cond.IfMatch != "" && cond.IfNoneMatch:
		return &objstore.Error{Op: op, Key: key, Message: "a condition cannot be both if-match and if-none-match"}
	case cond.IfMatch != "":
		if err := checkGeneration(op, key, cond.IfMatch); err != nil {
			return err
		}
		q.Set("ifGenerationMatch", cond.IfMatch)
	case cond.IfNoneMatch:
		q.Set("ifGenerationMatch", "0")
	}
	return nil
}

// decodeObject reads an object resource from a 2xx answer.
func (s *Store) decodeObject(c *call, resp *http.Response) (objstore.Object, error) {
	defer resp.Body.Close()
	var r objectResource
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxObjectBody)).Decode(&r); err != nil {
		return objstore.Object{}, &objstore.Error{Op: c.op, Key: c.key, Status: resp.StatusCode, Message: "reading the object's metadata: " + err.Error()}
	}
	if !r.Generation.set {
		return objstore.Object{}, &objstore.Error{Op: c.op, Key: c.key, Status: resp.StatusCode, Message: "the server answered an object without a generation"}
	}
	o := r.object()
	if o.Key == "" {
		o.Key = c.key
	}
	return o, nil
}
