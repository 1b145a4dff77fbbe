package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Prefix starts every key, so that a key pasted where it does not belong
// (a log, a repository, a ticket) is recognised by people and by secret
// scanners.
const Prefix = "plk_"

const (
	idBytes     = 8  // 16 hex characters: public, names the key
	secretBytes = 32 // 256 bits: no key is guessed, and a plain SHA-256 is a sound hash
)

var (
	secretEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)
	idLen          = hex.EncodedLen(idBytes)
	secretLen      = secretEncoding.EncodedLen(secretBytes)
	// KeyLen is the length of every key.
	KeyLen = len(Prefix) + idLen + 1 + secretLen
)

// Errors of Authenticate and the middleware.
var (
	// ErrMissing: the request has no credentials.
	ErrMissing = errors.New("no API key")
	// ErrInvalid: the credentials are malformed, unknown or revoked; which
	// of these is not told.
	ErrInvalid = errors.New("invalid API key")
	// ErrInQuery: the request carries a key in its query string, where
	// proxies and logs keep it.
	ErrInQuery = errors.New("API key in the query string")
)

// generate returns a new key and its id.
func generate() (key, id string, err error) {
	b := make([]byte, idBytes+secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("generating an API key: %w", err)
	}
	id = hex.EncodeToString(b[:idBytes])
	secret := strings.ToLower(secretEncoding.EncodeToString(b[idBytes:]))
	return Prefix + id + "_" + secret, id, nil
}

// ParseID returns the id of key, and false when key is not shaped like a
// key (prefix, id, secret). It says nothing about whether the key exists.
func ParseID(key string) (string, bool) {
	if len(key) != KeyLen || !strings.HasPrefix(key, Prefix) {
		return "", false
	}
	rest := key[len(Prefix):]
	id, secret := rest[:idLen], rest[idLen:]
	if secret[0] != '_' {
		return "", false
	}
	for i := 0; i < len(id); i++ {
		if !(id[i] >= '0' && id[i] <= '9' || id[i] >= 'a' && id[i] <= 'f') {
			return "", false
		}
	}
	for _, c := range secret[1:] {
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return "", false
		}
	}
	return id, true
}

// hash is what the database stores of a key.
func hash(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

var merchantRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// ValidMerchant reports whether m is a merchant id the API accepts: 1-64 of
// [A-Za-z0-9_-], starting with a letter or digit.
func ValidMerchant(m string) bool { return merchantRE.MatchString(m) }
