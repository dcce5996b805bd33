package httpgate

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// maxJWTLen bounds the size of a token this package will parse.
const maxJWTLen = 16 << 10

// A jwk is one public key of an issuer's JWKS, parsed.
type jwk struct {
	kid string
	alg string // the key's own "alg", if any: the only one it may be used with
	rsa *rsa.PublicKey
	ec  *ecdsa.PublicKey
}

// fits reports whether k may check a signature made with alg.
func (k jwk) fits(alg string) bool {
	if k.alg != "" && k.alg != alg {
		return false
	}
	switch alg {
	case "RS256":
		return k.rsa != nil
	case "ES256":
		return k.ec != nil
	}
	return false
}

// rawJWK is a JWK as JSON (RFC 7517, RFC 7518 §6).
type rawJWK struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// minRSABits is the smallest RSA modulus accepted.
const minRSABits = 2048

// parseJWK parses a signing key of kind RSA or EC P-256.
func parseJWK(r rawJWK) (jwk, error) {
	if r.Use != "" && r.Use != "sig" {
		return jwk{}, fmt.Errorf("key %q: use %q is not sig", r.Kid, r.Use)
	}
	if r.Alg != "" && r.Alg != "RS256" && r.Alg != "ES256" {
		return jwk{}, fmt.Errorf("key %q: alg %q not accepted", r.Kid, r.Alg)
	}
	k := jwk{kid: r.Kid, alg: r.Alg}
	switch r.Kty {
	case "RSA":
		n, err1 := base64.RawURLEncoding.DecodeString(r.N)
		e, err2 := base64.RawURLEncoding.DecodeString(r.E)
		if err1 != nil || err2 != nil || len(e) == 0 || len(e) > 4 {
			return jwk{}, fmt.Errorf("key %q: bad RSA n or e", r.Kid)
		}
		N := new(big.Int).SetBytes(n)
		E := int(new(big.Int).SetBytes(e).Int64())
		if N.BitLen() < minRSABits {
			return jwk{}, fmt.Errorf("key %q: RSA key of %d bits, want at least %d", r.Kid, N.BitLen(), minRSABits)
		}
		if E < 3 || E%2 == 0 {
			return jwk{}, fmt.Errorf("key %q: bad RSA exponent", r.Kid)
		}
		k.rsa = &rsa.PublicKey{N: N, E: E}
	case "EC":
		if r.Crv != "P-256" {
			return jwk{}, fmt.Errorf("key %q: curve %q not accepted", r.Kid, r.Crv)
		}
		x, err1 := base64.RawURLEncoding.DecodeString(r.X)
		y, err2 := base64.RawURLEncoding.DecodeString(r.Y)
		if err1 != nil || err2 != nil || len(x) != 32 || len(y) != 32 {
			return jwk{}, fmt.Errorf("key %q: bad P-256 x or y", r.Kid)
		}
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil {
			return jwk{}, fmt.Errorf("key %q: %v", r.Kid, err)
		}
		k.ec = pub
	default:
		return jwk{}, fmt.Errorf("key %q: kty %q not accepted", r.Kid, r.Kty)
	}
	return k, nil
}

// jwtHeader is a JWS protected header.
type jwtHeader struct {
	Alg  string          `json:"alg"`
	Kid  string          `json:"kid"`
	Crit json.RawMessage `json:"crit"`
}

// jwtClaims are the claims this package checks.
type jwtClaims struct {
	Iss   string   `json:"iss"`
	Sub   string   `json:"sub"`
	Aud   audience `json:"aud"`
	Exp   *float64 `json:"exp"`
	Nbf   *float64 `json:"nbf"`
	Scope string   `json:"scope"`
}

// audience is the aud claim: a string or an array of strings.
type audience []string

func (a *audience) UnmarshalJSON(data []byte) error {
	var one string
	if err := json.Unmarshal(data, &one); err == nil {
		*a = audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(data, &many); err != nil {
		return errors.New("aud is neither a string nor an array of strings")
	}
	*a = many
	return nil
}

// A parsedJWT is a compact JWS split and decoded, not yet verified.
type parsedJWT struct {
	header  jwtHeader
	signed  string // header.payload, the signing input
	payload []byte
	sig     []byte
}

// parseJWT splits and decodes a compact JWS. Errors wrap ErrBadToken or
// ErrAlgorithm.
func parseJWT(tok string) (*parsedJWT, error) {
	if len(tok) > maxJWTLen {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrBadToken, maxJWTLen)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%w: not a JWT (want three dot-separated parts)", ErrBadToken)
	}
	var p parsedJWT
	hdr, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return nil, fmt.Errorf("%w: header is not base64url", ErrBadToken)
	}
	if err := json.Unmarshal(hdr, &p.header); err != nil {
		return nil, fmt.Errorf("%w: header is not a JSON object", ErrBadToken)
	}
	switch p.header.Alg {
	case "RS256", "ES256":
	default:
		return nil, fmt.Errorf("%w: alg %q (want RS256 or ES256)", ErrAlgorithm, p.header.Alg)
	}
	if p.header.Crit != nil {
		return nil, fmt.Errorf("%w: header has crit extensions", ErrBadToken)
	}
	if p.payload, err = base64.RawURLEncoding.DecodeString(parts[1]); err != nil {
		return nil, fmt.Errorf("%w: payload is not base64url", ErrBadToken)
	}
	if p.sig, err = base64.RawURLEncoding.DecodeString(parts[2]); err != nil {
		return nil, fmt.Errorf("%w: signature is not base64url", ErrBadToken)
	}
	p.signed = parts[0] + "." + parts[1]
	return &p, nil
}

// verifyWith reports whether k's signature over p verifies.
func (p *parsedJWT) verifyWith(k jwk) bool {
	digest := sha256.Sum256([]byte(p.signed))
	switch p.header.Alg {
	case "RS256":
		return k.rsa != nil && rsa.VerifyPKCS1v15(k.rsa, crypto.SHA256, digest[:], p.sig) == nil
	case "ES256":
		if k.ec == nil || len(p.sig) != 64 {
			return false
		}
		r := new(big.Int).SetBytes(p.sig[:32])
		s := new(big.Int).SetBytes(p.sig[32:])
		return ecdsa.Verify(k.ec, digest[:], r, s)
	}
	return false
}

// checkClaims checks the verified payload's claims at time now and
// returns them.
func checkClaims(payload []byte, issuer, aud string, now time.Time) (*jwtClaims, error) {
	var c jwtClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, fmt.Errorf("%w: claims: %v", ErrBadToken, err)
	}
	if c.Iss != issuer {
		return nil, fmt.Errorf("%w: iss %q, want %q", ErrIssuer, c.Iss, issuer)
	}
	if !oauthex.MatchesResource(c.Aud, aud) {
		return nil, fmt.Errorf("%w: aud %q does not contain %q", ErrAudience, []string(c.Aud), aud)
	}
	if c.Exp == nil {
		return nil, fmt.Errorf("%w: no exp claim", ErrBadToken)
	}
	exp := numericDate(*c.Exp)
	if now.After(exp.Add(Leeway)) {
		return nil, fmt.Errorf("%w: expired at %v", ErrExpired, exp.UTC().Format(time.RFC3339))
	}
	if c.Nbf != nil {
		if nbf := numericDate(*c.Nbf); now.Add(Leeway).Before(nbf) {
			return nil, fmt.Errorf("%w: not valid before %v", ErrExpired, nbf.UTC().Format(time.RFC3339))
		}
	}
	if c.Sub == "" {
		return nil, fmt.Errorf("%w: no sub claim", ErrBadToken)
	}
	return &c, nil
}

// numericDate converts a JWT NumericDate (seconds since the epoch).
func numericDate(f float64) time.Time {
	const limit = 1e12 // some 31,000 years: keeps the conversion in range
	f = max(-limit, min(f, limit))
	sec := int64(f)
	return time.Unix(sec, int64((f-float64(sec))*1e9))
}
