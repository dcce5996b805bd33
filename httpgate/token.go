package httpgate

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// noAuth is the Authenticator of NoAuth.
type noAuth struct{}

// NoAuth returns an Authenticator that lets every request in as the
// principal "anonymous". Use it only on a loopback listener (see
// CheckListen).
func NoAuth() Authenticator { return noAuth{} }

func (noAuth) Authenticate(*http.Request) (*auth.TokenInfo, error) {
	return &auth.TokenInfo{UserID: "anonymous"}, nil
}
func (noAuth) Challenge() []string             { return nil }
func (noAuth) Public() map[string]http.Handler { return nil }

// MinTokenLen is the shortest token a token file may hold.
const MinTokenLen = 32

// TokenPrincipal is the principal of a request that presented the token
// of a token file.
const TokenPrincipal = "token"

// Token is an Authenticator that accepts one bearer token, read from a
// file by LoadOrCreateToken. Its String and Format methods never print the
// token.
type Token struct {
	path   string
	digest [sha256.Size]byte // SHA-256 of the token
}

// LoadOrCreateToken returns the Token in the file at path, making the file
// if it does not exist.
//
// A new file holds 64 hex digits (256 random bits) and a newline; it is
// written with mode 0600 through a temporary file in the same directory,
// synced and renamed into place, and a missing directory is made with mode
// 0700. An existing file is refused if group or others may read or write it,
// or if its token (trailing newlines and spaces trimmed) is shorter than
// MinTokenLen characters or contains white space.
//
// A client sends the file's contents in every request's header:
//
//	Authorization: Bearer <contents of the file>
func LoadOrCreateToken(path string) (*Token, error) {
	data, err := readTokenFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		data, err = createTokenFile(path)
	}
	if err != nil {
		return nil, err
	}
	tok := bytes.TrimRight(data, " \t\r\n")
	if len(tok) < MinTokenLen {
		return nil, fmt.Errorf("token file %s: the token is %d characters, want at least %d", path, len(tok), MinTokenLen)
	}
	if bytes.ContainsAny(tok, " \t\r\n") {
		return nil, fmt.Errorf("token file %s: the token contains white space", path)
	}
	return &Token{path: path, digest: sha256.Sum256(tok)}, nil
}

// readTokenFile reads the token file, refusing one that others may use.
func readTokenFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("token file %s: not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("token file %s: mode %04o lets group or others use it; run chmod 600 %s", path, perm, path)
	}
	const max = 4096
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("token file %s: %v", path, err)
	}
	if len(data) > max {
		return nil, fmt.Errorf("token file %s: longer than %d bytes", path, max)
	}
	return data, nil
}

// createTokenFile writes a new random token to path and returns the file's
// contents.
func createTokenFile(path string) ([]byte, error) {
	var raw [32]byte
	rand.Read(raw[:]) // never fails
	data := []byte(hex.EncodeToString(raw[:]) + "\n")
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("token file: %v", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, fmt.Errorf("token file: %v", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, a no-op
	err = tmp.Chmod(0o600)      // CreateTemp makes 0600; make sure
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// Link, not rename, so that a file made meanwhile by another
		// process is not replaced: both then use the one on disk.
		err = os.Link(tmp.Name(), path)
		if errors.Is(err, fs.ErrExist) {
			return readTokenFile(path)
		}
		if err != nil {
			// A file system without hard links.
			err = os.Rename(tmp.Name(), path)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("token file: %v", err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() // best effort: make the new name durable
		d.Close()
	}
	return data, nil
}

// Path returns the token file's path.
func (t *Token) Path() string { return t.path }

// String returns a description of t that does not contain the token.
func (t *Token) String() string { return "bearer token from " + t.path }

// Format formats t as String does, whatever the verb.
func (t *Token) Format(f fmt.State, verb rune) { fmt.Fprint(f, t.String()) }

// Authenticate accepts a request whose bearer token is t's, comparing
// SHA-256 digests in constant time.
func (t *Token) Authenticate(r *http.Request) (*auth.TokenInfo, error) {
	tok, err := bearerToken(r)
	if err != nil {
		return nil, err
	}
	got := sha256.Sum256([]byte(tok))
	if subtle.ConstantTimeCompare(got[:], t.digest[:]) != 1 {
		return nil, fmt.Errorf("%w: not the token of %s", ErrBadToken, t.path)
	}
	return &auth.TokenInfo{UserID: TokenPrincipal}, nil
}

// Challenge returns nil: in token mode no OAuth discovery is offered.
func (t *Token) Challenge() []string { return nil }

// Public returns nil: in token mode nothing is served without the token.
func (t *Token) Public() map[string]http.Handler { return nil }
