package orderhttp_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/services/orders/internal/orderhttp"
)

// A request without a key, or with a bad one, is refused with a Bearer
// challenge and a problem document, before anything is read or written.
func TestUnauthenticatedRequestsAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createOrder()
	for _, tc := range []struct {
		name, method, path, body, auth, code, challenge string
	}{
		{"no key, payment", "POST", "/v1/payments", paymentBody, "", "unauthenticated", `Bearer realm="paylab"`},
		{"no key, read", "GET", "/v1/orders/" + id, "", "", "unauthenticated", `Bearer realm="paylab"`},
		{"no key, capture", "POST", "/v1/orders/" + id + "/capture", "", "", "unauthenticated", `Bearer realm="paylab"`},
		{"a malformed key", "POST", "/v1/orders", paymentBody, "Bearer plk_nope", "api_key_invalid", `Bearer realm="paylab", error="invalid_token"`},
		{"a key's id with another secret", "POST", "/v1/orders/" + id + "/refunds", `{"amount":1}`,
			"Bearer " + b.key[:len(b.key)-4] + "aaaa", "api_key_invalid", `Bearer realm="paylab", error="invalid_token"`},
		{"the key as a Basic password", "GET", "/v1/orders/" + id, "", "Basic " + b.key, "api_key_invalid", `Bearer realm="paylab", error="invalid_token"`},
	} {
		res := b.do(tc.method, tc.path, tc.body, "Authorization", tc.auth, "Idempotency-Key", "k-"+tc.name)
		if res.Status != http.StatusUnauthorized || res.json(t)["code"] != tc.code ||
			res.Header.Get("WWW-Authenticate") != tc.challenge || res.Header.Get("Content-Type") != orderhttp.ContentTypeProblem {
			t.Errorf("%s: %d %v %s, want 401 %s with %q", tc.name, res.Status, res.Header, res.Body, tc.code, tc.challenge)
		}
	}
	if n := b.count("SELECT count(*) FROM orders"); n != 1 {
		t.Errorf("orders = %d, want the 1 of the setup", n)
	}
	if n := b.count("SELECT count(*) FROM idempotency_keys"); n != 0 {
		t.Errorf("idempotency keys = %d, want 0", n)
	}
	if o := b.order(id); o.Status != "authorized" {
		t.Errorf("order %+v changed", o)
	}
}

// Another merchant's order is not found, exactly as an unknown id: the
// same status, code and detail for a read, a capture and a refund, and
// nothing changes.
func TestAnotherMerchantsOrderIsNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	authorized, captured := b.createOrder(), b.placePayment()
	other := "Bearer " + b.newKey("mer_8")
	unknown := uuid.Must(uuid.NewV7()).String()
	for _, tc := range []struct {
		name, method, path, body string
	}{
		{"read", "GET", "/v1/orders/%s", ""},
		{"capture", "POST", "/v1/orders/%s/capture", ""},
		{"refund", "POST", "/v1/orders/%s/refunds", `{"amount":100}`},
	} {
		target := authorized
		if tc.name == "refund" {
			target = captured
		}
		theirs := b.do(tc.method, strings.Replace(tc.path, "%s", target, 1), tc.body, "Authorization", other, "Idempotency-Key", "x-"+tc.name)
		nobody := b.do(tc.method, strings.Replace(tc.path, "%s", unknown, 1), tc.body, "Authorization", other)
		p, q := theirs.json(t), nobody.json(t)
		if theirs.Status != http.StatusNotFound || p["code"] != "order_not_found" || p["code"] != q["code"] ||
			p["detail"] != q["detail"] || p["title"] != q["title"] || nobody.Status != theirs.Status {
			t.Errorf("%s of another merchant's order: %d %s; of an unknown one: %d %s", tc.name, theirs.Status, theirs.Body, nobody.Status, nobody.Body)
		}
		// The owner still sees it.
		if res := b.do(http.MethodGet, "/v1/orders/"+target, ""); res.Status != http.StatusOK || res.json(t)["merchant_id"] != "mer_7" {
			t.Errorf("the owner's read: %d %s", res.Status, res.Body)
		}
	}
	if o := b.order(authorized); o.Status != "authorized" || o.Version != 1 {
		t.Errorf("the authorized order changed: %+v", o)
	}
	if o := b.order(captured); o.Status != "captured" || o.Refunded != 0 {
		t.Errorf("the captured order changed: %+v", o)
	}
	if n := b.count("SELECT count(*) FROM outbox"); n != 1 {
		t.Errorf("outbox rows = %d, want the 1 of the setup's payment", n)
	}
	if n := b.count("SELECT count(*) FROM refunds"); n != 0 {
		t.Errorf("refunds = %d, want 0", n)
	}
}

// Idempotency-Keys are the merchant's: two merchants using the same key
// get two payments, each replays its own, and one's different body is
// refused only in its own scope.
func TestIdempotencyKeysArePerMerchant(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := "Bearer " + b.newKey("mer_8")
	body := `{"customer_id":"cus_42","amount":1999,"currency":"EUR"}`
	mine := b.do(http.MethodPost, "/v1/payments", body, "Idempotency-Key", "shared-1")
	theirs := b.do(http.MethodPost, "/v1/payments", body, "Idempotency-Key", "shared-1", "Authorization", other)
	if mine.Status != http.StatusCreated || theirs.Status != http.StatusCreated ||
		mine.Header.Get("Idempotency-Replayed") != "" || theirs.Header.Get("Idempotency-Replayed") != "" {
		t.Fatalf("the same key from two merchants: %d %v %s / %d %v %s", mine.Status, mine.Header, mine.Body, theirs.Status, theirs.Header, theirs.Body)
	}
	m, o := mine.json(t), theirs.json(t)
	if m["id"] == o["id"] || m["merchant_id"] != "mer_7" || o["merchant_id"] != "mer_8" {
		t.Fatalf("orders %v and %v, want two, of mer_7 and mer_8", m, o)
	}
	for _, tc := range []struct {
		auth string
		want response
	}{{"Bearer " + b.key, mine}, {other, theirs}} {
		again := b.do(http.MethodPost, "/v1/payments", body, "Idempotency-Key", "shared-1", "Authorization", tc.auth)
		if again.Status != http.StatusCreated || again.Body != tc.want.Body || again.Header.Get("Idempotency-Replayed") != "true" {
			t.Errorf("replay: %d %s, want the merchant's own %s", again.Status, again.Body, tc.want.Body)
		}
	}
	changed := `{"customer_id":"cus_42","amount":2000,"currency":"EUR"}`
	if res := b.do(http.MethodPost, "/v1/payments", changed, "Idempotency-Key", "shared-1", "Authorization", other); res.Status != http.StatusUnprocessableEntity ||
		res.json(t)["code"] != "idempotency_key_reused" {
		t.Errorf("mer_8 reusing its key: %d %s", res.Status, res.Body)
	}
	if res := b.do(http.MethodPost, "/v1/payments", changed, "Idempotency-Key", "fresh-for-mer_7"); res.Status != http.StatusCreated {
		t.Errorf("mer_7 with another key: %d %s", res.Status, res.Body)
	}
	if n := b.count("SELECT count(*) FROM idempotency_keys WHERE key = 'shared-1'"); n != 2 {
		t.Errorf("stored keys shared-1 = %d, want 2 (one per merchant)", n)
	}
	if n := b.count("SELECT count(*) FROM orders"); n != 3 {
		t.Errorf("orders = %d, want 3", n)
	}
}

// A revoked key is refused once the cache's TTL has passed.
func TestRevokedKeyIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if res := b.do(http.MethodPost, "/v1/payments", paymentBody); res.Status != http.StatusCreated {
		t.Fatalf("before the revocation: %d %s", res.Status, res.Body)
	}
	id, _ := apikey.ParseID(b.key)
	if revoked, err := apikey.NewStore(b.pool).Revoke(context.Background(), id); err != nil || !revoked {
		t.Fatalf("revoke: %v %v", revoked, err)
	}
	testenv.Eventually(t, 10*time.Second, "the revoked key refused", func() bool {
		res := b.do(http.MethodGet, "/v1/orders/"+uuid.Must(uuid.NewV7()).String(), "")
		return res.Status == http.StatusUnauthorized && res.json(t)["code"] == "api_key_invalid"
	})
}
