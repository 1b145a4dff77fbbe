package orderhttp

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/paylab/paylab/services/orders/internal/orderapp"
)

// Header names of the idempotency protocol.
const (
	HeaderIdempotencyKey      = "Idempotency-Key"
	HeaderIdempotencyReplayed = "Idempotency-Replayed"
)

// MaxIdempotencyKeyLength bounds an Idempotency-Key.
const MaxIdempotencyKeyLength = 255

// idempotency reads the Idempotency-Key of r. Without one it returns nil:
// the request is processed without deduplication. The key is the
// merchant's: another merchant's same key is another key. scope is the route
// ("POST /v1/payments"); canonical is the decoded request, so that requests
// that differ only in JSON white space or member order count as the same.
func idempotency(r *http.Request, merchant, scope string, canonical any, status int, render func(any) any) (*orderapp.Idempotency, error) {
	values := r.Header.Values(HeaderIdempotencyKey)
	if len(values) == 0 {
		return nil, nil
	}
	key := values[0]
	if len(values) > 1 || !validKey(key) {
		return nil, badRequest(http.StatusBadRequest, "idempotency_key_invalid",
			fmt.Sprintf("An Idempotency-Key is one header of 1 to %d visible ASCII characters.", MaxIdempotencyKeyLength))
	}
	hash, err := requestHash(scope, canonical)
	if err != nil {
		return nil, err
	}
	return &orderapp.Idempotency{
		Merchant:    merchant,
		Scope:       scope,
		Key:         key,
		RequestHash: hash,
		Encode: func(result any) (orderapp.Response, error) {
			body, err := encodeBody(render(result))
			return orderapp.Response{Status: status, Body: body}, err
		},
	}, nil
}

func validKey(k string) bool {
	if len(k) == 0 || len(k) > MaxIdempotencyKeyLength {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

func requestHash(scope string, canonical any) ([]byte, error) {
	body, err := json.Marshal(canonical)
	if err != nil {
		return nil, fmt.Errorf("hashing request: %w", err)
	}
	h := sha256.New()
	h.Write([]byte(scope))
	h.Write([]byte{0})
	h.Write(body)
	return h.Sum(nil), nil
}
