// Package objstore reads and writes the objects of a bucket: one interface,
// Store, and a client of its own for each provider in the packages beneath
// it (s3, for AWS S3, Cloudflare R2 and S3-compatible stores; gcs; azblob).
// It knows nothing of JSON-RPC, sessions or sandboxes: package mounts
// builds on it.
//
// # Versions and conditions
//
// Every object carries a Version, opaque to callers: S3's and Azure's
// ETag, GCS's generation. A write or delete may be conditional on it
// (Condition): a store answers a write whose condition fails with
// ErrPrecondition (HTTP 412), and the object in the bucket is left as it
// was. Some S3-compatible stores ignore conditional headers; the clients
// send them anyway, and callers that must never overwrite a change check
// the object with Head just before (package mounts does).
//
// # Errors
//
// Errors carry the provider's own words (its error code and message) and
// wrap one of the sentinel errors below where one applies, so callers use
// errors.Is. No error, log or request body a client builds holds a
// secret: credentials sign requests and are never formatted.
package objstore

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// Object describes one object of a bucket.
type Object struct {
	// Key is the object's full name in the bucket.
	Key string
	// Size is its length in bytes.
	Size int64
	// Version is its ETag (S3, Azure) or generation (GCS): it changes
	// whenever the object is written.
	Version string
	// ModTime is when it was last written, as the store says.
	ModTime time.Time
}

// Condition makes a write or delete conditional. The zero Condition is
// unconditional.
type Condition struct {
	// IfMatch, when set, is the Version the object must still have.
	IfMatch string
	// IfNoneMatch requires that no object has the key (a create).
	IfNoneMatch bool
}

// Store is a bucket (a container, for Azure) of one provider, reached with
// the credentials it was opened with. Its methods are safe for concurrent
// use. Keys are full object names; a prefix is a plain string prefix (the
// caller adds the "/" that makes it a folder).
type Store interface {
	// List calls fn for every object whose key begins with prefix, in
	// ascending key order, page by page; an error from fn stops it and is
	// returned. A missing bucket is ErrNoBucket.
	List(ctx context.Context, prefix string, fn func(Object) error) error
	// Open returns the bytes of the object key. With version set, the
	// object must still have it (else ErrPrecondition), so that what is
	// read is what was listed. A missing object is ErrNotFound.
	Open(ctx context.Context, key, version string) (io.ReadCloser, Object, error)
	// Head returns the object key as the store has it now, or
	// ErrNotFound.
	Head(ctx context.Context, key string) (Object, error)
	// Put writes size bytes of r as the object key if cond holds, and
	// returns the object written (its new Version). Large objects go up
	// in parts (multipart upload, blocks, a resumable upload), read from
	// r concurrently; a failed upload leaves no part behind that the
	// client can remove.
	Put(ctx context.Context, key string, r io.ReaderAt, size int64, cond Condition) (Object, error)
	// Delete removes the object key if cond holds. A missing object is
	// ErrNotFound.
	Delete(ctx context.Context, key string, cond Condition) error
}

// Credentials are a secret's fields, as the brief names them (PROTOCOL.md,
// "Mounts"). A client uses those of its provider: S3 and R2 the access key
// pair, its session token, endpoint and region; GCS the session token (an
// OAuth 2 access token) and endpoint; Azure the account name and key and
// endpoint. Credentials never appear in an error or a log: its String and
// GoString methods print the fields' names only.
type Credentials struct {
	AccessKeyID     string `json:"accessKeyId,omitempty"`
	SecretAccessKey string `json:"secretAccessKey,omitempty"`
	SessionToken    string `json:"sessionToken,omitempty"`
	AccountName     string `json:"accountName,omitempty"`
	AccountKey      string `json:"accountKey,omitempty"`
	Endpoint        string `json:"endpoint,omitempty"`
	Region          string `json:"region,omitempty"`
}

// String names the fields that are set, never their values.
func (c Credentials) String() string {
	s := "credentials{"
	sep := ""
	for _, f := range []struct {
		name, v string
	}{
		{"accessKeyId", c.AccessKeyID}, {"secretAccessKey", c.SecretAccessKey},
		{"sessionToken", c.SessionToken}, {"accountName", c.AccountName},
		{"accountKey", c.AccountKey}, {"endpoint", c.Endpoint}, {"region", c.Region},
	} {
		if f.v != "" {
			s += sep + f.name
			sep = " "
		}
	}
	return s + "}"
}

// GoString is String, so that %#v prints no secret either.
func (c Credentials) GoString() string { return c.String() }

// Loopback says whether host, a URL's hostname, is localhost or a
// loopback address (127.0.0.0/8, ::1): the only hosts a client reaches
// over plain http://, since a secret signs every request.
func Loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// The sentinel errors a client's errors wrap.
var (
	// ErrNotFound is a missing object.
	ErrNotFound = errors.New("no such object")
	// ErrNoBucket is a missing bucket or container.
	ErrNoBucket = errors.New("no such bucket")
	// ErrPrecondition is a condition that failed (HTTP 412): the object
	// changed, or exists, or does not.
	ErrPrecondition = errors.New("the object changed")
	// ErrAuth is a store that refused the credentials (HTTP 401 or 403).
	ErrAuth = errors.New("access denied")
)

// Error is a store's refusal: the HTTP status and the provider's own code
// and message. It wraps Err, a sentinel error above, where one applies.
type Error struct {
	Op      string // "list", "get", "head", "put", "delete"
	Key     string // the object or prefix
	Status  int    // the HTTP status, 0 if none came
	Code    string // the provider's error code, as it sent it
	Message string // the provider's message, as it sent it
	Err     error  // a sentinel error, or the transport's
}

func (e *Error) Error() string {
	s := e.Op + " " + e.Key + ": "
	switch {
	case e.Code != "" && e.Message != "":
		s += e.Code + ": " + e.Message
	case e.Code != "":
		s += e.Code
	case e.Message != "":
		s += e.Message
	case e.Err != nil:
		s += e.Err.Error()
	}
	if e.Status != 0 {
		s += " (HTTP " + strconv.Itoa(e.Status) + ")"
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }
