package httpgate

import "errors"

// The errors an [Authenticator] returns, each wrapped with %w in an error
// that says more (never the token itself). Test for them with errors.Is.
var (
	// ErrNoToken means that the request carried no bearer token.
	ErrNoToken = errors.New("no bearer token")
	// ErrBadToken means that the token is malformed or not the one expected.
	ErrBadToken = errors.New("invalid token")
	// ErrExpired means that the token's exp has passed, or its nbf has not
	// yet come.
	ErrExpired = errors.New("token expired or not yet valid")
	// ErrAudience means that the token's aud does not name this server.
	ErrAudience = errors.New("token audience is not this server")
	// ErrIssuer means that the token's iss is not the configured issuer.
	ErrIssuer = errors.New("token issuer is not the configured issuer")
	// ErrSignature means that the token's signature does not verify with any
	// of the issuer's keys.
	ErrSignature = errors.New("token signature does not verify")
	// ErrAlgorithm means that the token's alg is neither RS256 nor ES256
	// (alg none included), or does not fit its key.
	ErrAlgorithm = errors.New("token algorithm not accepted")
	// ErrUnavailable means that the token could not be checked for a
	// reason that is not the client's: the issuer's keys could not be
	// fetched. The gate answers 503.
	ErrUnavailable = errors.New("token cannot be checked now")
)

// authFailures are the sentinels, most specific first, for describing an
// error to a client without echoing anything the client sent.
var authFailures = []error{ErrNoToken, ErrExpired, ErrAudience, ErrIssuer, ErrSignature, ErrAlgorithm, ErrUnavailable, ErrBadToken}

// describe returns the first sentinel err wraps, or ErrBadToken.
func describe(err error) error {
	for _, s := range authFailures {
		if errors.Is(err, s) {
			return s
		}
	}
	return ErrBadToken
}
