package mounts

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// The kinds of store a mount names, as the wire spells them.
const (
	KindS3             = "s3"
	KindGCS            = "gcs"
	KindR2             = "r2"
	KindAzureBlob      = "azureBlob"
	KindBoxStorage     = "boxStorage"
	KindProviderNative = "providerNative"
)

// Kinds are the kinds the wire knows, in its order; the first four are
// supported.
var Kinds = []string{KindS3, KindGCS, KindR2, KindAzureBlob, KindBoxStorage, KindProviderNative}

// Supported reports whether kind is one this package mounts.
func Supported(kind string) bool {
	switch kind {
	case KindS3, KindGCS, KindR2, KindAzureBlob:
		return true
	}
	return false
}

// schemes maps a URI's scheme to its kind.
var schemes = map[string]string{
	"s3": KindS3,
	"r2": KindR2,
	"gs": KindGCS,
	"az": KindAzureBlob,
}

// ErrSpec is a mount that is malformed: a bad flag, name, path or URI.
var ErrSpec = errors.New("bad mount")

// ErrUnsupported is a kind the wire knows and this server does not
// mount (boxStorage, providerNative), or one the wire does not know.
var ErrUnsupported = errors.New("unsupported mount kind")

// Spec is one mount: the bucket's objects under URI's prefix shown at
// Path.
type Spec struct {
	// Name names the mount in the session: non-empty, unique, and fit to
	// be a file name (no "/", no control character, not "." or "..").
	Name string
	// Path is where confined commands see the objects: absolute and
	// clean.
	Path string
	// ReadOnly is a mount that nothing writes, and whose changes are
	// never written back.
	ReadOnly bool
	// Kind is the store's kind (KindS3, ...): it must be the kind of
	// URI's scheme.
	Kind string
	// URI is s3://bucket/prefix, r2://bucket/prefix, gs://bucket/prefix
	// or az://container/prefix.
	URI string
	// SecretID names the credentials (see Secrets), or is empty for
	// none.
	SecretID string
}

// ParseFlag parses the value of the server's --mount flag,
// name=N,path=P,uri=U[,secret=ID][,rw]: read-only unless rw, its kind
// the URI's. The spec it returns has passed Check.
func ParseFlag(v string) (Spec, error) {
	s := Spec{ReadOnly: true}
	seen := map[string]bool{}
	for _, f := range strings.Split(v, ",") {
		k, val, hasVal := strings.Cut(f, "=")
		if seen[k] {
			return Spec{}, fmt.Errorf("%w: --mount %q: %s given twice", ErrSpec, v, k)
		}
		seen[k] = true
		switch {
		case k == "rw" && !hasVal:
			s.ReadOnly = false
		case k == "name" && hasVal:
			s.Name = val
		case k == "path" && hasVal:
			s.Path = val
		case k == "uri" && hasVal:
			s.URI = val
		case k == "secret" && hasVal:
			if val == "" {
				return Spec{}, fmt.Errorf("%w: --mount %q: secret= names no secret", ErrSpec, v)
			}
			s.SecretID = val
		default:
			return Spec{}, fmt.Errorf("%w: --mount %q: unknown field %q (want name=N,path=P,uri=U[,secret=ID][,rw])", ErrSpec, v, f)
		}
	}
	for _, k := range []string{"name", "path", "uri"} {
		if !seen[k] {
			return Spec{}, fmt.Errorf("%w: --mount %q: no %s= (want name=N,path=P,uri=U[,secret=ID][,rw])", ErrSpec, v, k)
		}
	}
	kind, _, _, err := ParseURI(s.URI)
	if err != nil {
		return Spec{}, err
	}
	s.Kind = kind
	if err := s.Check(); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// ParseURI splits a mount's URI into the kind its scheme names, its
// bucket (or container) and the prefix to list: the URI's path as a
// folder, with a trailing "/" ("s3://bkt/data" lists "data/", never
// "data-old/"), or "" for the whole bucket. The URI is taken as written:
// no percent-decoding, no query or fragment.
func ParseURI(uri string) (kind, bucket, prefix string, err error) {
	bad := func(why string) (string, string, string, error) {
		return "", "", "", fmt.Errorf("%w: uri %q: %s", ErrSpec, uri, why)
	}
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return bad("not scheme://bucket/prefix")
	}
	kind, ok = schemes[scheme]
	if !ok {
		return bad("scheme " + strconvQuote(scheme) + " is not s3, r2, gs or az")
	}
	bucket, path, _ := strings.Cut(rest, "/")
	if bucket == "" {
		return bad("no bucket")
	}
	if strings.ContainsAny(bucket, "?#@:%\\ ") || hasControl(bucket) {
		return bad("bucket " + strconvQuote(bucket) + " holds a character no bucket name has")
	}
	if strings.HasPrefix(path, "/") {
		return bad("prefix has an empty component")
	}
	path = strings.TrimSuffix(path, "/")
	if path == "" {
		return kind, bucket, "", nil
	}
	if hasControl(path) {
		return bad("prefix holds a control character")
	}
	for _, c := range strings.Split(path, "/") {
		if c == "" || c == "." || c == ".." {
			return bad("prefix has an empty, \".\" or \"..\" component")
		}
	}
	return kind, bucket, path + "/", nil
}

// Check checks one spec: its name, its path, its URI, and that its kind
// is supported and the URI's.
func (s Spec) Check() error {
	if s.Name == "" {
		return fmt.Errorf("%w: a mount has no name", ErrSpec)
	}
	if s.Name == "." || s.Name == ".." || strings.Contains(s.Name, "/") || hasControl(s.Name) {
		return fmt.Errorf("%w: mount name %q: not a file name (no \"/\", no control character, not \".\" or \"..\")", ErrSpec, s.Name)
	}
	if !filepath.IsAbs(s.Path) || filepath.Clean(s.Path) != s.Path {
		return fmt.Errorf("%w: mount %q: path %q is not absolute and clean", ErrSpec, s.Name, s.Path)
	}
	kind, _, _, err := ParseURI(s.URI)
	if err != nil {
		return fmt.Errorf("mount %q: %w", s.Name, err)
	}
	if !Supported(s.Kind) {
		return fmt.Errorf("%w: mount %q: kind %q (this server mounts s3, gcs, r2 and azureBlob)", ErrUnsupported, s.Name, s.Kind)
	}
	if kind != s.Kind {
		return fmt.Errorf("%w: mount %q: kind %q, but uri %q is %s", ErrSpec, s.Name, s.Kind, s.URI, kind)
	}
	return nil
}

// CheckSpecs checks each spec and the list: names unique, and no mount's
// path equal to or inside another's.
func CheckSpecs(specs []Spec) error {
	names := map[string]bool{}
	for _, s := range specs {
		if err := s.Check(); err != nil {
			return err
		}
		if names[s.Name] {
			return fmt.Errorf("%w: two mounts are named %q", ErrSpec, s.Name)
		}
		names[s.Name] = true
	}
	for i, a := range specs {
		for _, b := range specs[i+1:] {
			if within(a.Path, b.Path) || within(b.Path, a.Path) {
				return fmt.Errorf("%w: mounts %q and %q: path %q and %q overlap", ErrSpec, a.Name, b.Name, a.Path, b.Path)
			}
		}
	}
	return nil
}

// within reports whether the clean absolute path p is dir or inside it.
func within(p, dir string) bool {
	if p == dir || dir == "/" {
		return true
	}
	return strings.HasPrefix(p, dir+"/")
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

func strconvQuote(s string) string { return fmt.Sprintf("%q", s) }
