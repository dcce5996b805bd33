package mounts

import (
	"errors"
	"fmt"

	"github.com/toolhost/toolhost/objstore"
)

// ErrLimit is a listing over the mount's Limits: nothing was fetched.
var ErrLimit = errors.New("mount over its limits")

// Error is a mount that failed: the caller answers it as -32035
// MountFailed with data {name, kind, reason}. Reason carries the
// provider's own words (an objstore.Error's text) where the store
// refused, and never a secret. It wraps the cause, so that errors.Is
// finds ErrLimit, ErrSecret, objstore.ErrAuth and the like.
type Error struct {
	Name   string // the mount's name
	Kind   string // its kind (KindS3, ...)
	Reason string // what went wrong, in words
	Err    error  // the cause
}

func (e *Error) Error() string { return "mount " + e.Name + " (" + e.Kind + "): " + e.Reason }

func (e *Error) Unwrap() error { return e.Err }

// mountErr wraps err as the Error of spec, unless it is one already.
func mountErr(spec Spec, err error) error {
	if err == nil {
		return nil
	}
	var me *Error
	if errors.As(err, &me) {
		return err
	}
	return &Error{Name: spec.Name, Kind: spec.Kind, Reason: err.Error(), Err: err}
}

// Opener makes the client of one store: kind is the spec's (KindS3,
// KindR2, KindGCS, KindAzureBlob), bucket the URI's bucket or container.
// The caller provides it (it imports the provider clients; this package
// does not).
type Opener func(kind, bucket string, creds objstore.Credentials) (objstore.Store, error)

// Open checks spec and opens its store with open and creds. Its errors
// are *Error.
func Open(spec Spec, creds objstore.Credentials, open Opener) (objstore.Store, error) {
	if err := spec.Check(); err != nil {
		return nil, mountErr(spec, err)
	}
	_, bucket, _, err := ParseURI(spec.URI)
	if err != nil {
		return nil, mountErr(spec, err)
	}
	if open == nil {
		return nil, mountErr(spec, fmt.Errorf("%w: no client for %s", ErrUnsupported, spec.Kind))
	}
	st, err := open(spec.Kind, bucket, creds)
	if err != nil {
		return nil, mountErr(spec, err)
	}
	return st, nil
}
