// Package apikey is paylab's merchant API keys: how they are made, stored,
// checked and limited.
//
// A key is "plk_" + a 16-hex-digit id + "_" + a 256-bit secret (base32),
// shown once when it is created (paylab keys create). The databases keep
// only its SHA-256 with its id and merchant, in the api_keys table of both
// the orders and the ledger database (Store writes both). A request names
// its key with "Authorization: Bearer <key>"; Authenticator finds the
// stored hash by the key's id, caches it for a short TTL (so a busy API
// reads the table once per key and TTL, and a revocation takes effect
// within the TTL; a row past its TTL still serves, for StaleIfError, while
// the table cannot be read), and compares the hashes in constant time. The
// key's merchant is the request's merchant (FromContext).
//
// Authenticate and Limiter.Middleware are the HTTP middleware; Limiter
// keeps a token bucket per key (golang.org/x/time/rate) and answers
// LimitError, with the wait, when a key's bucket is empty.
package apikey
