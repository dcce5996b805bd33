package s3

import (
	"encoding/xml"
	"io"
	"net/http"
	"strings"

	"github.com/toolhost/toolhost/objstore"
)

// maxErrorBody bounds what is read of an error response.
const maxErrorBody = 64 << 10

// xmlError is S3's error document: <Error><Code/><Message/>…</Error>.
// Only Code and Message are kept: the other elements of some errors
// (SignatureDoesNotMatch's StringToSign, InvalidAccessKeyId's
// AWSAccessKeyId) are never read.
type xmlError struct {
	XMLName xml.Name `xml:"Error"`
	Code    string   `xml:"Code"`
	Message string   `xml:"Message"`
}

// responseError reads (a bounded part of) the error response resp, closes
// its body, and makes the *objstore.Error it means.
func (s *Store) responseError(op, key string, resp *http.Response) error {
	var x xmlError
	if resp.Request == nil || resp.Request.Method != http.MethodHead {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		_ = xml.Unmarshal(body, &x)
	}
	resp.Body.Close()
	msg := x.Message
	if r := resp.Header.Get("X-Amz-Bucket-Region"); r != "" && r != s.region &&
		(resp.StatusCode == http.StatusMovedPermanently || resp.StatusCode == http.StatusBadRequest) {
		// A bucket of another region: AWS says which in a header.
		msg = strings.TrimSpace(msg + " (the bucket is in region " + r + ")")
	}
	return s.newError(op, key, resp.StatusCode, x.Code, msg)
}

// newError makes the error of op on key from the store's status, code and
// message, with the sentinel they mean. Code and message pass through
// scrub: a store that echoed a credential would not have it shown.
func (s *Store) newError(op, key string, status int, code, msg string) *objstore.Error {
	code, msg = s.scrub(code), s.scrub(msg)
	e := &objstore.Error{Op: op, Key: key, Status: status, Code: code, Message: msg,
		Err: sentinel(op, status, code)}
	if code == "" && msg == "" && e.Err == nil {
		e.Message = http.StatusText(status)
	}
	return e
}

// sentinel is the objstore sentinel error a refusal means, or nil.
func sentinel(op string, status int, code string) error {
	switch code {
	case "NoSuchKey":
		return objstore.ErrNotFound
	case "NoSuchBucket":
		return objstore.ErrNoBucket
	case "PreconditionFailed", "ConditionalRequestConflict":
		// ConditionalRequestConflict (409): a write raced this conditional
		// one: the object changed.
		return objstore.ErrPrecondition
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch",
		"ExpiredToken", "InvalidToken", "TokenRefreshRequired",
		"AuthorizationHeaderMalformed", "InvalidSecurity", "AccountProblem":
		return objstore.ErrAuth
	}
	switch status {
	case http.StatusPreconditionFailed:
		return objstore.ErrPrecondition
	case http.StatusUnauthorized, http.StatusForbidden:
		return objstore.ErrAuth
	case http.StatusNotFound:
		if code != "" && code != "NotFound" {
			return nil // NoSuchUpload and the like
		}
		// A HEAD's 404 has no body to tell a missing key from a missing
		// bucket: for an object it is the object.
		if op == "list" {
			return objstore.ErrNoBucket
		}
		return objstore.ErrNotFound
	}
	return nil
}

// scrub replaces any credential in a store's words with "[redacted]".
func (s *Store) scrub(str string) string {
	for _, sec := range s.secrets {
		if len(sec) >= 4 && strings.Contains(str, sec) {
			str = strings.ReplaceAll(str, sec, "[redacted]")
		}
	}
	return str
}
