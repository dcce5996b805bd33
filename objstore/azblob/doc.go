// Package azblob is the objstore client of Azure Blob Storage: a Store is
// one container, reached over the Blob service's REST API (version
// 2021-08-06) with net/http alone. It does not use Azure's SDK, which
// would add megabytes to the binary for the five requests it needs.
//
// # Authorization
//
// With an account key (objstore.Credentials AccountName and AccountKey,
// the key base64 as the portal shows it), every request is signed with
// Shared Key: an HMAC-SHA256, under the key, of the request's verb, its
// standard headers, its x-ms- headers (x-ms-date is the time of
// signing) and its resource (the account, the path as sent, the query
// decoded), sent as "Authorization: SharedKey ACCOUNT:SIGNATURE". The key
// itself never leaves the process.
//
// With a SAS token instead (the credentials' SessionToken: the query of
// a shared access signature, "sv=…&sig=…", with or without its "?"),
// the token is added to every request's query and nothing is signed;
// AccountKey may then be empty, and AccountName too when Endpoint is
// set. A SAS wins over a key when both are given. The SAS needs the
// permissions of what the caller does: list (l), read (r), write (w),
// create (c), delete (d), on objects (and, for an account SAS, on
// containers, for List).
//
// Microsoft Entra ID (OAuth) tokens are not supported.
//
// # Endpoints
//
// Without Credentials.Endpoint, the service is
// https://ACCOUNT.blob.core.windows.net. An endpoint names another: a
// sovereign cloud's (https://ACCOUNT.blob.core.chinacloudapi.cn), a
// custom domain, or an emulator, whose endpoint carries the account in its
// path (Azurite's http://127.0.0.1:10000/devstoreaccount1); a blob is then
// ENDPOINT/CONTAINER/NAME, and the path's account is signed as part of the
// path. An http:// endpoint is refused unless its host is a loopback
// address or localhost; an endpoint with a user, password, query or
// fragment is refused too.
//
// Blob names are sent percent-encoded, all but the unreserved characters
// and "/", so names with spaces, "+", "%", "?", "#" or non-ASCII
// characters are what they are. The service itself turns "\" into "/",
// and advises against names ending in "." or "/", or with "." or ".."
// segments; this client sends them as they are and does not check them.
//
// # Versions and conditions
//
// An object's Version is its ETag, quoted as the ETag header has it
// ("0x8DB…"); List Blobs sends it bare, and List quotes it, so that one
// object has one Version whichever method saw it. A condition's IfMatch
// is sent as If-Match, and IfNoneMatch as "If-None-Match: *": on Put
// Blob, on the Put Block List that commits a large Put, on Delete, and
// (If-Match only) on Open's Get Blob.
//
// # Writes and blocks
//
// Put writes an object up to Options.BlockSize (16 MiB by default) with
// one Put Blob of type BlockBlob. A larger one is staged in blocks of that
// size (more, for an object that would need over 50,000 of them), with
// Put Block, Options.Concurrency at once (4 by default), read from the
// io.ReaderAt concurrently, then committed with one Put Block List that
// carries the condition. Before staging, Put checks the condition against
// the object's properties (a Head), so that an upload that would be
// refused is not made; the commit checks it again, and that check is the
// one that counts. Each request carries the MD5 of its body
// (Content-MD5), which the service checks: a reader whose bytes change
// between the client's two reads of a block fails the Put. A reader
// shorter than the size given fails it too.
//
// Block ids are a random prefix of each upload and the block's index, so
// two uploads to one name at once never replace each other's blocks. The
// service has no request to remove staged blocks: those of a Put that
// failed stay, uncommitted and invisible to List and Get, until the blob's
// next commit (any Put of that name) discards them, or the service does
// after a week.
//
// # Errors
//
// A refusal is an *objstore.Error with the HTTP status, the service's
// error code (x-ms-error-code, or the XML body's Code) and its Message,
// less the "RequestId:…" and "Time:…" lines the service appends to
// every message. It wraps:
//   - objstore.ErrAuth for 401 and 403 (AuthenticationFailed from Azure,
//     AuthorizationFailure from Azurite, a SAS without the permission);
//   - objstore.ErrPrecondition for 412 (ConditionNotMet) and for 409
//     BlobAlreadyExists (If-None-Match: * on an object that exists);
//   - objstore.ErrNoBucket for 404 ContainerNotFound (and a List's 404);
//   - objstore.ErrNotFound for any other 404 (BlobNotFound).
//
// No error holds the account key, the SAS token or its signature: the
// transport's errors are stripped of the request's URL (whose query holds
// the SAS), and any text that came from elsewhere is scrubbed of them
// before it is kept. The package logs nothing.
//
// # Retries
//
// Every request is sent again, four times in all at most, with a backoff
// from 200 ms doubling with jitter, after an answer of 500, 502, 503 or
// 504 (or another 5xx but 501 and 505), or a connection that was reset,
// aborted or timed out before the answer's head came. All the requests
// this client makes are idempotent (GET, HEAD, PUT of whole blobs, blocks
// and block lists, DELETE), so sending one again does no harm; but a
// conditional write or delete that took effect, and whose answer was
// lost, is refused when sent again (ErrPrecondition, or ErrNotFound for a
// delete), which a caller takes for a conflict: the safe side. A body
// that breaks once Open has returned is not resumed.
//
// # Not supported
//
// Creating or deleting containers (a Store's container must exist);
// append and page blobs (Put replaces one with a block blob, and a Put
// Block List on one fails); snapshots and blob versions (Delete of a
// blob with snapshots fails with 409 SnapshotsPresent, left to the
// caller); leases (a write or delete of a leased blob fails with 412
// LeaseIdMissing, so ErrPrecondition); access tiers, metadata, content types (blobs are
// application/octet-stream), customer-provided encryption keys; the
// directories of a hierarchical namespace (Data Lake Storage) account,
// which List shows as the empty blobs they are; and Entra ID
// authorization.
package azblob
