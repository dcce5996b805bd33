package mounts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/toolhost/toolhost/objstore"
)

// ErrSecret is a secret that cannot be had: an unknown id, a secrets file
// that is malformed or open to others, an environment variable that does
// not hold a secret. Its errors never hold a secret's value.
var ErrSecret = errors.New("bad secret")

// maxSecretsFile bounds what LoadSecrets reads.
const maxSecretsFile = 1 << 20

// Secrets are the credentials of a --secrets file, by id. A nil *Secrets
// is no file: Lookup then reads the environment alone. Secrets never
// print their values.
type Secrets struct {
	path string                          // the file's name, for errors
	byID map[string]objstore.Credentials // immutable after LoadSecrets
}

// LoadSecrets reads the --secrets file at path: JSON {ID: {accessKeyId,
// secretAccessKey, sessionToken?, accountName?, accountKey?, endpoint?,
// region?}}. It refuses a symlink, anything but a regular file, a file
// the server's user (os.Getuid) does not own, and one that its group or
// others may read or write (mode & 0o077 != 0), with errors that name the
// file and never a value in it.
func LoadSecrets(path string) (*Secrets, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: secrets file: %w", ErrSecret, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("%w: secrets file %s is a symlink (name the file itself)", ErrSecret, path)
	}
	f, err := openNoFollow(path)
	if err != nil {
		return nil, fmt.Errorf("%w: secrets file: %w", ErrSecret, err)
	}
	defer f.Close()
	fi, err = f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: secrets file: %w", ErrSecret, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: secrets file %s is not a regular file", ErrSecret, path)
	}
	if err := checkOwner(fi); err != nil {
		return nil, fmt.Errorf("%w: secrets file %s: %w", ErrSecret, path, err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: secrets file %s has mode %#o: its group or others may read or write it (chmod 600 it)", ErrSecret, path, perm)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSecretsFile+1))
	if err != nil {
		return nil, fmt.Errorf("%w: secrets file: %w", ErrSecret, err)
	}
	if len(data) > maxSecretsFile {
		return nil, fmt.Errorf("%w: secrets file %s is over %d bytes", ErrSecret, path, maxSecretsFile)
	}
	var raw map[string]json.RawMessage
	if err := decodeStrict(data, &raw); err != nil {
		return nil, fmt.Errorf("%w: secrets file %s: %s", ErrSecret, path, err)
	}
	if raw == nil {
		return nil, fmt.Errorf("%w: secrets file %s: not a JSON object of secrets by id", ErrSecret, path)
	}
	s := &Secrets{path: path, byID: make(map[string]objstore.Credentials, len(raw))}
	for id, msg := range raw {
		if id == "" {
			return nil, fmt.Errorf("%w: secrets file %s: a secret has an empty id", ErrSecret, path)
		}
		c, err := parseCredentials(msg)
		if err != nil {
			return nil, fmt.Errorf("%w: secrets file %s: secret %q: %s", ErrSecret, path, id, err)
		}
		s.byID[id] = c
	}
	return s, nil
}

// IDs returns the ids of the file's secrets, sorted.
func (s *Secrets) IDs() []string {
	if s == nil {
		return nil
	}
	ids := make([]string, 0, len(s.byID))
	for id := range s.byID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// String names the file and its ids, never a value.
func (s *Secrets) String() string {
	if s == nil {
		return "secrets{}"
	}
	return "secrets{" + s.path + ": " + strings.Join(s.IDs(), " ") + "}"
}

// GoString is String, so that %#v prints no secret either.
func (s *Secrets) GoString() string { return s.String() }

// Lookup resolves the secret id: from the secrets file when it has id
// (the file wins), else from the environment variable EnvName(id), read
// with getenv (os.Getenv when nil). An id in neither is ErrSecret.
func (s *Secrets) Lookup(id string, getenv func(string) string) (objstore.Credentials, error) {
	if id == "" {
		return objstore.Credentials{}, fmt.Errorf("%w: an empty secret id", ErrSecret)
	}
	if s != nil {
		if c, ok := s.byID[id]; ok {
			return c, nil
		}
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	name := EnvName(id)
	v := getenv(name)
	if v == "" {
		where := "no --secrets file has it"
		if s != nil {
			where = "the secrets file " + s.path + " does not have it"
		}
		return objstore.Credentials{}, fmt.Errorf("%w: unknown secret id %q: %s, and %s is not set", ErrSecret, id, where, name)
	}
	c, err := parseCredentials(json.RawMessage(v))
	if err != nil {
		return objstore.Credentials{}, fmt.Errorf("%w: secret %q: environment variable %s: %s", ErrSecret, id, name, err)
	}
	return c, nil
}

// EnvName is the environment variable that may hold the secret id:
// TOOLHOST_SECRET_ and the id upper-cased, every character other than an
// ASCII letter or digit as "_".
func EnvName(id string) string {
	var b strings.Builder
	b.WriteString("TOOLHOST_SECRET_")
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z':
			b.WriteRune(r - 'a' + 'A')
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// credentialFields are the fields a secret may have, as its JSON names
// them.
var credentialFields = map[string]func(*objstore.Credentials) *string{
	"accessKeyId":     func(c *objstore.Credentials) *string { return &c.AccessKeyID },
	"secretAccessKey": func(c *objstore.Credentials) *string { return &c.SecretAccessKey },
	"sessionToken":    func(c *objstore.Credentials) *string { return &c.SessionToken },
	"accountName":     func(c *objstore.Credentials) *string { return &c.AccountName },
	"accountKey":      func(c *objstore.Credentials) *string { return &c.AccountKey },
	"endpoint":        func(c *objstore.Credentials) *string { return &c.Endpoint },
	"region":          func(c *objstore.Credentials) *string { return &c.Region },
}

// parseCredentials decodes one secret. Its errors name fields, never
// values: encoding/json's own errors may quote the text they stumble on,
// so they are never passed on.
func parseCredentials(msg json.RawMessage) (objstore.Credentials, error) {
	var raw map[string]json.RawMessage
	if err := decodeStrict(msg, &raw); err != nil {
		return objstore.Credentials{}, err
	}
	if raw == nil {
		return objstore.Credentials{}, errors.New("not a JSON object {accessKeyId, secretAccessKey, ...}")
	}
	var c objstore.Credentials
	for k, v := range raw {
		field, ok := credentialFields[k]
		if !ok {
			// The name is not quoted: a secret may stand where a
			// field's name should.
			return objstore.Credentials{}, errors.New("a field other than accessKeyId, secretAccessKey, sessionToken, accountName, accountKey, endpoint and region")
		}
		if err := json.Unmarshal(v, field(&c)); err != nil {
			return objstore.Credentials{}, fmt.Errorf("field %q is not a string", k)
		}
	}
	return c, nil
}

// decodeStrict decodes data, a JSON object, into v, with an error that
// quotes nothing of data: only where it went wrong.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		switch {
		case errors.As(err, &se):
			return fmt.Errorf("not valid JSON (at byte %d)", se.Offset)
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return errors.New("not valid JSON (it ends early)")
		default:
			return errors.New("not a JSON object")
		}
	}
	if dec.More() {
		return errors.New("not valid JSON (text after the object)")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("not valid JSON (text after the object)")
	}
	return nil
}
