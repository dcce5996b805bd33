// Package gcs is the objstore client of Google Cloud Storage: a Store is
// one bucket, reached through GCS's JSON API (storage/v1) over net/http.
// It is written by hand, without cloud.google.com/go/storage, which would
// add some 30 MB to toolhost's binary.
//
// # Endpoint and authentication
//
// Requests go to the credentials' Endpoint (an emulator such as
// fake-gcs-server, or a private or regional endpoint), else to
// https://storage.googleapis.com; a trailing /storage/v1 in it is
// dropped. Plain http:// is refused unless the host is loopback
// (127.0.0.0/8, ::1, localhost).
//
// The credentials' SessionToken is an OAuth 2 access token, sent as
// "Authorization: Bearer". Without one, requests go unauthenticated, as an
// emulator or a public bucket takes them. Service-account keys are not
// supported yet: the brief's secret format carries a token, and minting
// one (a signed JWT exchanged at Google's token endpoint) and refreshing it
// before its hour is out is left to whoever writes the secret. The other
// fields of Credentials are not used. The token goes only to the
// endpoint's origin (a resumable upload's session on another host gets
// none: its URL is a capability of its own), and never into an error: a
// server's message that quotes it has it blanked out, and a transport's
// error loses its *url.Error, whose message quotes the URL.
//
// # Versions and conditions
//
// An object's Version is its generation, as a decimal string; every write
// makes a new one. Conditions are GCS's generation preconditions:
// Condition.IfMatch is sent as ifGenerationMatch=<generation> and
// IfNoneMatch as ifGenerationMatch=0 (no live object), on uploads and
// deletes; Open with a version sends ifGenerationMatch=<version> and also
// checks the generation the answer carries (x-goog-generation), so that
// a server which ignores the condition on reads still cannot hand over
// other bytes than those listed. A refusal (HTTP 412, reason
// conditionNotMet) is objstore.ErrPrecondition.
//
// fake-gcs-server (v1.56.1, which the tests run against) honours
// ifGenerationMatch on every kind of upload, but ignores it on DELETE and on
// GET: a stale conditional delete there deletes. Real GCS honours it on
// all three.
//
// # Reads and listings
//
// List pages through objects.list (1,000 a page, only the fields the
// client reads), in GCS's order, ascending by name; a 404 is
// objstore.ErrNoBucket. Open streams objects.get with alt=media. It asks
// for "Accept-Encoding: gzip" itself, so an object stored gzip-encoded
// comes as its stored bytes, neither transcoded by GCS nor decompressed by
// the transport, and its size is the listed one. Open's Object takes its
// generation and size from the answer's headers and its ModTime from
// Last-Modified (whole seconds, where List and Head give milliseconds).
// Object names are percent-encoded whole in a request's path ('/' as %2F),
// so any name, spaces, '+', '#', '?' and non-ASCII included, is sent as
// it is.
//
// # Uploads
//
// An object up to Options.ChunkSize (16 MiB unless set; a multiple of 256
// KiB) goes up in one request (uploadType=media). A larger one goes up in a
// resumable upload (uploadType=resumable): the session is started, then
// the object is sent a chunk at a time with Content-Range, each chunk read
// from the caller's ReaderAt by a section reader as it is sent, so nothing
// of the object is buffered. A chunk that fails (no answer, 408, 429, 5xx)
// is followed, after a pause, by a query of how much the session holds,
// and the upload goes on from there; an upload that fails for good
// cancels its session (DELETE), which drops what it held. The Object a Put
// returns is the one GCS answers with: its Version is the new generation.
//
// # Errors and retries
//
// A refusal is an *objstore.Error carrying the HTTP status, the first
// reason of the JSON error body as Code and its message as Message, and
// wrapping the sentinel its status calls for: 401 and 403 ErrAuth; 404
// ErrNotFound, or ErrNoBucket for a listing, an upload, or a message saying
// the bucket does not exist; 412 ErrPrecondition. A request that got no
// answer wraps the transport's error (so errors.Is finds, say,
// syscall.ECONNREFUSED or context.Canceled).
//
// Idempotent requests (reads, listings, conditional writes and deletes,
// starting an upload session) are tried up to four times on a 408, 429 or
// 5xx, or a connection that failed, with a pause that doubles from about a
// quarter second (or the server's Retry-After, at most 4 s). Unconditional
// writes and deletes are retried only when the connection could not be
// made, since one may have taken effect unseen. A conditional delete
// retried after such an attempt that then finds no object reports
// success; a conditional upload retried after one and refused reports
// ErrPrecondition, as it cannot tell its own write from another's.
//
// # Not supported
//
// Service-account keys, workload identity and token refresh (above);
// object metadata, content types (objects are written as
// application/octet-stream), storage classes, customer-supplied
// encryption keys and requester-pays buckets; listing or reading
// noncurrent generations; parallel composite uploads; checksums sent with
// an upload (GCS computes its own); and HTTP redirects, which are never
// followed.
package gcs
