package azblob

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// signedHeaders are the standard headers whose values the Shared Key
// string to sign holds after Content-Length's, in its order.
var signedHeaders = [...]string{
	"Content-MD5", "Content-Type", "Date", "If-Modified-Since", "If-Match",
	"If-None-Match", "If-Unmodified-Since", "Range",
}

// stringToSign is the Shared Key string to sign of req for account
// (learn.microsoft.com/rest/api/storageservices/authorize-with-shared-key,
// the Blob service's form for versions 2009-09-19 and later):
//
//	VERB\n Content-Encoding\n Content-Language\n Content-Length\n
//	Content-MD5\n Content-Type\n Date\n If-Modified-Since\n If-Match\n
//	If-None-Match\n If-Unmodified-Since\n Range\n
//	CanonicalizedHeaders CanonicalizedResource
//
// Content-Length is empty when it is zero (versions 2015-02-21 and
// later). CanonicalizedHeaders is every x-ms- header, its name lower-case,
// sorted, as "name:value\n" with the value trimmed; this client never sends
// a value with folded or repeated whitespace, which the service would
// collapse. CanonicalizedResource is "/" + account + the request's path as
// sent (encoded; with an Azurite endpoint the account's name is in it
// too, so it appears twice), then each query parameter, its name
// lower-case, sorted, as "\nname:value" with its values decoded, sorted
// and joined by commas.
func stringToSign(req *http.Request, account string) string {
	var b strings.Builder
	b.WriteString(req.Method)
	b.WriteByte('\n')
	b.WriteString(req.Header.Get("Content-Encoding"))
	b.WriteByte('\n')
	b.WriteString(req.Header.Get("Content-Language"))
	b.WriteByte('\n')
	if req.ContentLength > 0 {
		b.WriteString(strconv.FormatInt(req.ContentLength, 10))
	}
	b.WriteByte('\n')
	for _, h := range signedHeaders {
		b.WriteString(req.Header.Get(h))
		b.WriteByte('\n')
	}

	var names []string
	for name := range req.Header {
		if l := strings.ToLower(name); strings.HasPrefix(l, "x-ms-") {
			names = append(names, name)
		}
	}
	slices.SortFunc(names, func(a, b string) int { return strings.Compare(strings.ToLower(a), strings.ToLower(b)) })
	for _, name := range names {
		b.WriteString(strings.ToLower(name))
		b.WriteByte(':')
		b.WriteString(strings.TrimSpace(strings.Join(req.Header.Values(name), ",")))
		b.WriteByte('\n')
	}

	b.WriteByte('/')
	b.WriteString(account)
	if p := req.URL.EscapedPath(); p != "" {
		b.WriteString(p)
	} else {
		b.WriteByte('/')
	}
	q := req.URL.Query()
	params := make(map[string][]string, len(q))
	var keys []string
	for k, vs := range q {
		l := strings.ToLower(k)
		if _, ok := params[l]; !ok {
			keys = append(keys, l)
		}
		params[l] = append(params[l], vs...)
	}
	slices.Sort(keys)
	for _, k := range keys {
		vs := params[k]
		slices.Sort(vs)
		b.WriteByte('\n')
		b.WriteString(k)
		b.WriteByte(':')
		b.WriteString(strings.Join(vs, ","))
	}
	return b.String()
}

// signature is the base64 HMAC-SHA256 of s under key.
func signature(key []byte, s string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}
