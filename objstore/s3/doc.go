// Package s3 is the objstore client of AWS S3, Cloudflare R2 and
// S3-compatible stores (MinIO, Ceph, Garage, …): a few hundred lines over
// net/http, with no AWS SDK, so that the binary grows by little.
//
// # Addressing
//
// New takes the bucket, the credentials and Options.Kind, "s3" or "r2".
// With credentials.Endpoint set (any S3-compatible store, and R2, whose
// endpoint is required: https://ACCOUNT_ID.r2.cloudflarestorage.com), a
// request goes to endpoint/bucket/key (path-style); a path in the endpoint
// is kept before the bucket. Without one, kind s3 is AWS: the virtual host
// https://bucket.s3.REGION.amazonaws.com/key, or path-style on
// https://s3.REGION.amazonaws.com when the bucket's name cannot be a DNS
// label of that host (a name with dots would not match AWS's wildcard
// certificate). The region is credentials.Region, by default us-east-1
// for s3 and "auto" for r2. A bucket of another region answers 301
// PermanentRedirect, whose error says which region AWS named; no redirect
// is followed.
//
// An endpoint must be https://, or http:// to a loopback address
// (127.0.0.0/8, ::1, localhost): New refuses any other, and one that
// carries a user or password. Credentials without accessKeyId or
// secretAccessKey are refused too, the error naming the missing field.
//
// # Signing
//
// Every request is signed with AWS Signature Version 4 (AWS4-HMAC-SHA256,
// service "s3") in the Authorization header: X-Amz-Date, the session
// token as X-Amz-Security-Token, and X-Amz-Content-Sha256, the hex
// SHA-256 of the body. Bodies are plain: never aws-chunked (the streaming
// signatures and integrity trailers the AWS SDKs send by default) nor
// UNSIGNED-PAYLOAD, because S3-compatible stores that do not decode
// aws-chunked store its framing as the object's bytes; S3 itself checks the
// hash against the body, so what is stored is what was sent. To hash
// before sending without buffering, Put reads its io.ReaderAt twice: once
// to hash, once to send. The canonical request encodes each path segment
// once (S3's rule, unlike other services) with '/' kept, and the client
// sends the path in that very encoding. The signer is checked against
// AWS's four published S3 examples.
//
// # Versions and conditions
//
// An object's Version is its ETag in its quoted form, "…", as S3 sends it
// in headers and listings; a store that sends it bare has the quotes
// added, so that List, Head, Open and Put agree. Open with a version sends
// If-Match and also compares the ETag answered, so that a store that
// ignores If-Match on GET still never hands over another version
// (ErrPrecondition). A body that breaks off mid-read is resumed with a
// ranged GET If-Match the same ETag, a few times at most.
//
// Put sends If-Match (Condition.IfMatch) and If-None-Match: *
// (Condition.IfNoneMatch) on PutObject, and for a multipart upload on
// CompleteMultipartUpload, where AWS checks them (since 2024). Delete sends
// If-Match, which AWS honours for general purpose buckets. A store that
// ignores a condition writes or deletes anyway: the caller that must never
// overwrite a change checks with Head just before (package mounts does).
// gofakes3, the test server, honours conditions on PutObject only (see
// TestGofakes3Gaps).
//
// Delete of a missing key: S3 answers 204 whether the key was there or
// not, and Delete then returns nil (no Head is spent to tell); a store
// that answers 404 gives ErrNotFound.
//
// # Multipart
//
// An object larger than Options.PartSize (16 MiB by default, 5 MiB at
// least) goes up in parts of that size (larger if it would need more than
// 10,000): CreateMultipartUpload, then Options.Concurrency workers (4)
// each hashing and sending its own section of the ReaderAt, then
// CompleteMultipartUpload with the conditions; the Version is the ETag
// Complete answers (S3's "…-N" form). Nothing is buffered: an upload holds
// a 64 KiB hashing buffer and the transport's buffers per worker, whatever
// the size. Any failure, a canceled context included, aborts the upload
// (AbortMultipartUpload, given 30 s of its own) so that no part is left
// to be billed. Complete may answer 200 and then an <Error>: that is a
// failure too.
//
// # R2
//
// R2 speaks the same protocol with SigV4 and region "auto"; the
// differences that matter here are that it has no AWS endpoint to default
// to (the account's endpoint is required) and, like other S3-compatible
// stores, it may not honour every conditional header: conditions are sent
// all the same, and callers check with Head.
//
// # Errors
//
// A refusal is an *objstore.Error with the HTTP status and S3's own Code
// and Message from its XML error document, wrapping the sentinel it means:
// NoSuchKey (and a 404 on an object) ErrNotFound, NoSuchBucket (and a 404
// on a listing) ErrNoBucket, 412 PreconditionFailed and 409
// ConditionalRequestConflict ErrPrecondition, 401/403, AccessDenied,
// InvalidAccessKeyId, SignatureDoesNotMatch, ExpiredToken and the like
// ErrAuth. A HEAD's error has no body: a missing bucket there is
// ErrNotFound. A transport error is wrapped as the Error's Err (its text
// shows the request's URL: the endpoint and key, never a credential).
// No error holds a credential: none is ever formatted, the access key id
// travels only in the Authorization header, which nothing logs, and the
// store's code and message are scrubbed of the access key id, secret and
// session token should a store echo them.
//
// # Retries
//
// Reads (GET, HEAD, ListObjectsV2), UploadPart, AbortMultipartUpload and
// unconditional PutObject and DeleteObject are sent again after a 5xx, a
// 429 or a transport error (not a refused certificate), three times at
// most, 100 ms, 400 ms and 1.6 s apart with jitter. A conditional write
// or delete, CreateMultipartUpload and CompleteMultipartUpload are not: a
// retry after a lost answer would be refused for the change it made, or
// start a second upload.
package s3
