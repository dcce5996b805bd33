package s3

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"
)

const (
	algorithm = "AWS4-HMAC-SHA256"
	// emptySHA256 is the hex SHA-256 of no bytes: the payload hash of a
	// request without a body.
	emptySHA256   = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	amzDateFormat = "20060102T150405Z"
)

// unsignedHeaders are the request headers left out of a signature: a proxy
// or the transport may add or change them.
var unsignedHeaders = map[string]bool{
	"authorization":   true,
	"user-agent":      true,
	"accept-encoding": true,
	"content-length":  true,
	"expect":          true,
	"connection":      true,
	"x-amzn-trace-id": true,
}

// signer signs requests with AWS Signature Version 4 (AWS4-HMAC-SHA256),
// the payload's SHA-256 in a header (never a streaming or unsigned
// payload). Its fields are never formatted: it has no String method on
// purpose and no error holds it.
type signer struct {
	accessKey, secretKey, token string
	region, service             string

	mu      sync.Mutex
	keyDate string // the date the cached signing key is for, yyyymmdd
	key     []byte
}

// sign sets X-Amz-Date, X-Amz-Content-Sha256, X-Amz-Security-Token (with
// a session token) and Authorization on req, whose URL must already be
// in its final form. payloadHash is the hex SHA-256 of the body.
func (s *signer) sign(req *http.Request, payloadHash string, now time.Time) {
	amzDate := now.UTC().Format(amzDateFormat)
	date := amzDate[:8]
	req.Header.Set("X-Amz-Date", amzDate)
	req.Header.Set("X-Amz-Content-Sha256", payloadHash)
	if s.token != "" {
		req.Header.Set("X-Amz-Security-Token", s.token)
	}
	creq, signed := canonicalRequest(req, payloadHash)
	scope := date + "/" + s.region + "/" + s.service + "/aws4_request"
	sum := sha256.Sum256([]byte(creq))
	sts := algorithm + "\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	sig := hex.EncodeToString(hmacSHA256(s.signingKey(date), sts))
	req.Header.Set("Authorization", algorithm+" Credential="+s.accessKey+"/"+scope+
		", SignedHeaders="+signed+", Signature="+sig)
}

// signingKey derives the key of one day (kSigning), cached for that day.
func (s *signer) signingKey(date string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keyDate != date {
		k := hmacSHA256([]byte("AWS4"+s.secretKey), date)
		k = hmacSHA256(k, s.region)
		k = hmacSHA256(k, s.service)
		s.key = hmacSHA256(k, "aws4_request")
		s.keyDate = date
	}
	return s.key
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// canonicalRequest is SigV4's canonical form of req, and the list of
// headers it signs.
func canonicalRequest(req *http.Request, payloadHash string) (creq, signedHeaders string) {
	// S3 encodes each path segment once (other services twice) and keeps
	// the slashes: the canonical URI is the strict encoding of the decoded
	// path, which is also exactly what the client sends (objectPath).
	uri := uriEncode(req.URL.Path, false)
	if uri == "" {
		uri = "/"
	}

	headers := map[string][]string{}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	headers["host"] = []string{host}
	for k, vs := range req.Header {
		lk := strings.ToLower(k)
		if unsignedHeaders[lk] {
			continue
		}
		for _, v := range vs {
			headers[lk] = append(headers[lk], strings.Join(strings.Fields(v), " "))
		}
	}
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	sort.Strings(names)
	var ch strings.Builder
	for _, k := range names {
		ch.WriteString(k)
		ch.WriteByte(':')
		ch.WriteString(strings.Join(headers[k], ","))
		ch.WriteByte('\n')
	}
	signedHeaders = strings.Join(names, ";")

	return req.Method + "\n" + uri + "\n" + canonicalQuery(req.URL.Query()) + "\n" +
		ch.String() + "\n" + signedHeaders + "\n" + payloadHash, signedHeaders
}

// canonicalQuery is the query sorted by name then value, each strictly
// URI-encoded (a name without a value as "name="). The client sends its
// queries in this very form.
func canonicalQuery(q url.Values) string {
	type pair struct{ k, v string }
	var ps []pair
	for k, vs := range q {
		ek := uriEncode(k, true)
		for _, v := range vs {
			ps = append(ps, pair{ek, uriEncode(v, true)})
		}
	}
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].k != ps[j].k {
			return ps[i].k < ps[j].k
		}
		return ps[i].v < ps[j].v
	})
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
	}
	return b.String()
}

// uriEncode is SigV4's URI encoding: every byte but the unreserved
// characters A-Z a-z 0-9 - _ . ~ as %XX (upper-case hex), '/' kept unless
// encodeSlash.
func uriEncode(s string, encodeSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9',
			c == '-', c == '_', c == '.', c == '~':
			b.WriteByte(c)
		case c == '/' && !encodeSlash:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}
