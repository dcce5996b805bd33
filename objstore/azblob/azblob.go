package azblob

import (
	"context"
	"encoding/base64"
	"encoding/xml"
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

// apiVersion is the Blob service version every request asks for
// (x-ms-version). It is one Azurite 3.34 accepts without
// --skipApiVersionCheck, and late enough for a Put Blob of up to 5,000
// MiB, blocks of up to 4,000 MiB, and the Encoded attribute of listed
// names.
const apiVersion = "2021-08-06"

const (
	// DefaultBlockSize is the size of the blocks a large Put stages, and
	// the size up to which a Put is one Put Blob.
	DefaultBlockSize = 16 << 20
	// DefaultConcurrency is how many blocks a Put stages at once.
	DefaultConcurrency = 4

	// maxBlocks is the most blocks a block blob commits.
	maxBlocks = 50_000
	// maxBlockSize is the largest block the service stages (versions
	// 2019-12-12 and later).
	maxBlockSize = 4000 << 20
)

// Options tune a Store; the zero Options are the defaults.
type Options struct {
	// HTTPClient sends the requests; nil is a client of this package's
	// own (http.DefaultTransport's settings, and a bound on the wait for
	// a response's head). The Store never follows a redirect, whatever
	// the client's CheckRedirect says.
	HTTPClient *http.Client
	// BlockSize is the size of a Put's blocks, and the size up to which
	// a Put is one request; 0 is DefaultBlockSize. It grows, for an
	// object that would need more than 50,000 blocks of it.
	BlockSize int64
	// Concurrency is how many blocks a Put stages at once; 0 is
	// DefaultConcurrency.
	Concurrency int

	// listPage, when set, is the most names one List Blobs request asks
	// for (the service's default and most is 5,000): tests make List page.
	listPage int
}

// Store is one container of an Azure Storage account's Blob service. It
// implements objstore.Store; its methods are safe for concurrent use.
type Store struct {
	container string
	client    *http.Client
	scheme    string
	host      string
	// base is the endpoint's path, encoded, without a trailing slash:
	// "" for https://ACCOUNT.blob.core.windows.net, "/devstoreaccount1"
	// for Azurite's http://127.0.0.1:10000/devstoreaccount1.
	base string

	account string
	key     []byte // the decoded account key; nil with a SAS
	sas     string // the SAS token's query, without "?"; "" with a key

	blockSize   int64
	concurrency int
	listPage    int
}

var _ objstore.Store = (*Store)(nil)

// defaultClient is the client of Stores opened without one.
var defaultClient = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// A server that takes a request and never answers fails it, and a
	// retry may follow; a response's body has no such bound (Open
	// streams), only the caller's context.
	t.ResponseHeaderTimeout = 2 * time.Minute
	return &http.Client{Transport: t}
}()

// New returns the Store of container with creds: their AccountName and
// AccountKey (base64, as the portal shows it) sign every request with
// Shared Key; or their SessionToken, a SAS token, is added to every
// request's query instead, and AccountKey may be empty. The endpoint is
// creds.Endpoint, which may carry the account in its path (Azurite's
// http://127.0.0.1:10000/devstoreaccount1), or else
// https://ACCOUNT.blob.core.windows.net. An http:// endpoint is refused
// unless its host is a loopback address or localhost. New sends nothing:
// a wrong key or a missing container shows at the first request.
func New(container string, creds objstore.Credentials, o Options) (*Store, error) {
	if container == "" || strings.ContainsAny(container, "/?#") {
		return nil, fmt.Errorf("azblob: %q is not a container name", container)
	}
	s := &Store{
		container:   container,
		account:     creds.AccountName,
		blockSize:   o.BlockSize,
		concurrency: o.Concurrency,
		listPage:    o.listPage,
	}
	if s.blockSize <= 0 {
		s.blockSize = DefaultBlockSize
	}
	if s.blockSize > maxBlockSize {
		s.blockSize = maxBlockSize
	}
	if s.concurrency <= 0 {
		s.concurrency = DefaultConcurrency
	}

	switch {
	case creds.SessionToken != "":
		sas := strings.TrimPrefix(creds.SessionToken, "?")
		q, err := url.ParseQuery(sas)
		if err != nil || q.Get("sig") == "" {
			// Neither the token nor the parser's words, which quote it.
			return nil, errors.New("azblob: the session token is not a SAS token (a query with sig=…)")
		}
		s.sas = sas
	case creds.AccountKey != "":
		key, err := base64.StdEncoding.DecodeString(creds.AccountKey)
		if err != nil || len(key) == 0 {
			return nil, errors.New("azblob: the account key is not base64")
		}
		if creds.AccountName == "" {
			return nil, errors.New("azblob: an account key needs its account name")
		}
		s.key = key
	default:
		return nil, errors.New("azblob: the credentials have neither an account key nor a SAS token (sessionToken)")
	}

	endpoint := creds.Endpoint
	if endpoint == "" {
		if !validAccount(creds.AccountName) {
			return nil, errors.New("azblob: without an endpoint, the credentials need the account's name (3 to 24 lower-case letters and digits)")
		}
		endpoint = "https://" + creds.AccountName + ".blob.core.windows.net"
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, errors.New("azblob: the endpoint is not a URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("azblob: the endpoint's scheme is %q, not https", u.Scheme)
	case u.Host == "" || u.Opaque != "":
		return nil, errors.New("azblob: the endpoint has no host")
	case u.User != nil:
		return nil, errors.New("azblob: the endpoint carries a user or password; give the account key instead")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, errors.New("azblob: the endpoint carries a query or fragment; give a SAS token as the session token")
	case u.Scheme == "http" && !objstore.Loopback(u.Hostname()):
		return nil, fmt.Errorf("azblob: the endpoint's host %s is not loopback, so it must be https://", u.Hostname())
	}
	s.scheme, s.host = u.Scheme, u.Host
	s.base = strings.TrimRight(u.EscapedPath(), "/")

	s.client = defaultClient
	if o.HTTPClient != nil {
		s.client = o.HTTPClient
	}
	c := *s.client
	// A redirect would carry the request elsewhere; the service never
	// sends one, so it is an answer like any other, and an error.
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	s.client = &c
	return s, nil
}

// validAccount says whether name is a storage account's name.
func validAccount(name string) bool {
	if len(name) < 3 || len(name) > 24 {
		return false
	}
	for _, c := range name {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// escapePath percent-encodes a blob's name or a container's for a URL's
// path: everything but the unreserved characters of RFC 3986 and "/", so
// that "+", spaces and non-ASCII reach the service as what they are (the
// encoding of Azure's Python SDK, quote(name, safe="~/")).
func escapePath(s string) string {
	return escape(s, true)
}

// escapeQuery percent-encodes a query parameter's name or value, a space
// as %20 (the service decodes "+" as a space).
func escapeQuery(s string) string {
	return escape(s, false)
}

func escape(s string, keepSlash bool) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '.', c == '_', c == '~', c == '/' && keepSlash:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

// etag is the Version of an ETag as the service sent it: quoted, as the
// ETag header has it (List Blobs sends it bare).
func etag(v string) string {
	if v == "" || strings.HasPrefix(v, `"`) || strings.HasPrefix(v, "W/") {
		return v
	}
	return `"` + v + `"`
}

// conditions sets the headers of cond on h.
func conditions(h http.Header, cond objstore.Condition) {
	if cond.IfMatch != "" {
		h.Set("If-Match", etag(cond.IfMatch))
	}
	if cond.IfNoneMatch {
		h.Set("If-None-Match", "*")
	}
}

// object is the Object key as the headers of a response describe it.
func object(key string, h http.Header) objstore.Object {
	o := objstore.Object{Key: key, Version: etag(h.Get("ETag"))}
	o.Size, _ = strconv.ParseInt(h.Get("Content-Length"), 10, 64)
	o.ModTime, _ = http.ParseTime(h.Get("Last-Modified"))
	return o
}

// checkKey refuses an empty key, which would name the container itself.
func checkKey(op, key string) error {
	if key == "" {
		return &objstore.Error{Op: op, Key: key, Message: "an object's key is not empty"}
	}
	return nil
}

// List calls fn for each blob whose name begins with prefix, a page of
// List Blobs (flat, committed blobs only) at a time.
func (s *Store) List(ctx context.Context, prefix string, fn func(objstore.Object) error) error {
	marker := ""
	for {
		q := [][2]string{{"restype", "container"}, {"comp", "list"}}
		if prefix != "" {
			q = append(q, [2]string{"prefix", prefix})
		}
		if marker != "" {
			q = append(q, [2]string{"marker", marker})
		}
		if s.listPage > 0 {
			q = append(q, [2]string{"maxresults", strconv.Itoa(s.listPage)})
		}
		resp, err := s.do(ctx, &call{op: "list", key: prefix, method: http.MethodGet, query: q})
		if err != nil {
			return err
		}
		var page listResult
		err = xml.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return &objstore.Error{Op: "list", Key: prefix, Status: resp.StatusCode, Message: "the list of blobs is not XML the client reads", Err: err}
		}
		for _, b := range page.Blobs {
			name := b.Name.Value
			if b.Name.Encoded {
				// Names with characters XML 1.0 cannot carry come
				// percent-encoded.
				if name, err = url.PathUnescape(name); err != nil {
					return &objstore.Error{Op: "list", Key: prefix, Status: resp.StatusCode, Message: "a listed name is encoded wrongly", Err: err}
				}
			}
			o := objstore.Object{Key: name, Size: b.Size, Version: etag(b.ETag)}
			o.ModTime, _ = http.ParseTime(b.LastModified)
			if err := fn(o); err != nil {
				return err
			}
		}
		if page.NextMarker == "" {
			return nil
		}
		marker = page.NextMarker
	}
}

// listResult is a page of List Blobs, the parts of it List reads.
type listResult struct {
	Blobs []struct {
		Name struct {
			Encoded bool   `xml:"Encoded,attr"`
			Value   string `xml:",chardata"`
		} `xml:"Name"`
		LastModified string `xml:"Properties>Last-Modified"`
		ETag         string `xml:"Properties>Etag"`
		Size         int64  `xml:"Properties>Content-Length"`
	} `xml:"Blobs>Blob"`
	NextMarker string `xml:"NextMarker"`
}

// Open gets the blob key, If-Match version when it is set, and returns
// its body as the service streams it.
func (s *Store) Open(ctx context.Context, key, version string) (io.ReadCloser, objstore.Object, error) {
	if err := checkKey("get", key); err != nil {
		return nil, objstore.Object{}, err
	}
	c := &call{op: "get", key: key, method: http.MethodGet, blob: true, header: http.Header{}}
	conditions(c.header, objstore.Condition{IfMatch: version})
	resp, err := s.do(ctx, c)
	if err != nil {
		return nil, objstore.Object{}, err
	}
	return resp.Body, object(key, resp.Header), nil
}

// Head gets the blob key's properties.
func (s *Store) Head(ctx context.Context, key string) (objstore.Object, error) {
	if err := checkKey("head", key); err != nil {
		return objstore.Object{}, err
	}
	resp, err := s.do(ctx, &call{op: "head", key: key, method: http.MethodHead, blob: true})
	if err != nil {
		return objstore.Object{}, err
	}
	resp.Body.Close()
	return object(key, resp.Header), nil
}

// Delete deletes the blob key if cond holds. A blob with snapshots is
// not deleted: the service answers 409 SnapshotsPresent.
func (s *Store) Delete(ctx context.Context, key string, cond objstore.Condition) error {
	if err := checkKey("delete", key); err != nil {
		return err
	}
	c := &call{op: "delete", key: key, method: http.MethodDelete, blob: true, header: http.Header{}}
	conditions(c.header, cond)
	resp, err := s.do(ctx, c)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}
