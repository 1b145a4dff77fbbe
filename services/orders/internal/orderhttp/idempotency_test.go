package orderhttp_test

import (
	"net/http"
	"sync"
	"testing"
)

func TestIdempotentReplayReturnsTheStoredResponse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.do(http.MethodPost, "/v1/payments", paymentBody, "Idempotency-Key", "pay-1")
	if first.Status != http.StatusCreated || first.Header.Get("Idempotency-Replayed") != "" {
		t.Fatalf("first = %d %v %s", first.Status, first.Header, first.Body)
	}
	// The same request, with other white space and member order.
	same := `{ "currency":"EUR", "amount":1999, "merchant_id":"mer_7", "customer_id":"cus_42" }`
	for _, body := range []string{paymentBody, same} {
		again := b.do(http.MethodPost, "/v1/payments", body, "Idempotency-Key", "pay-1")
		if again.Status != http.StatusCreated || again.Body != first.Body {
			t.Fatalf("replay = %d %s, want 201 and the identical body %s", again.Status, again.Body, first.Body)
		}
		if again.Header.Get("Idempotency-Replayed") != "true" {
			t.Errorf("replay lacks Idempotency-Replayed: true: %v", again.Header)
		}
	}
	if n := b.count("SELECT count(*) FROM orders"); n != 1 {
		t.Fatalf("orders = %d, want 1", n)
	}
	if n := b.count("SELECT count(*) FROM outbox"); n != 1 {
		t.Fatalf("outbox rows = %d, want 1", n)
	}

	// The same key with a different request is refused, and does nothing.
	other := `{"customer_id":"cus_42","merchant_id":"mer_7","amount":2000,"currency":"EUR"}`
	res := b.do(http.MethodPost, "/v1/payments", other, "Idempotency-Key", "pay-1")
	if res.Status != http.StatusUnprocessableEntity || res.json(t)["code"] != "idempotency_key_reused" {
		t.Fatalf("different body = %d %s", res.Status, res.Body)
	}
	if n := b.count("SELECT count(*) FROM orders"); n != 1 {
		t.Fatalf("orders = %d, want 1", n)
	}
	// Without a key, or with another one, the request is a new payment.
	for _, key := range []string{"", "pay-2"} {
		hdr := []string{}
		if key != "" {
			hdr = []string{"Idempotency-Key", key}
		}
		if res := b.do(http.MethodPost, "/v1/payments", paymentBody, hdr...); res.Status != http.StatusCreated || res.Body == first.Body {
			t.Fatalf("key %q = %d %s", key, res.Status, res.Body)
		}
	}
	if n := b.count("SELECT count(*) FROM orders"); n != 3 {
		t.Fatalf("orders = %d, want 3", n)
	}
}

// A client that retries a capture after a timeout never captures twice: it
// gets the first capture's response back, not a 409.
func TestIdempotentCaptureRetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createOrder()
	first := b.do(http.MethodPost, "/v1/orders/"+id+"/capture", "", "Idempotency-Key", "cap-1")
	retry := b.do(http.MethodPost, "/v1/orders/"+id+"/capture", "{}", "Idempotency-Key", "cap-1")
	if first.Status != http.StatusOK || retry.Status != http.StatusOK || retry.Body != first.Body ||
		retry.Header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("first = %d %s; retry = %d %v %s", first.Status, first.Body, retry.Status, retry.Header, retry.Body)
	}
	if rows := b.outbox(id); len(rows) != 1 {
		t.Fatalf("outbox rows = %d, want 1", len(rows))
	}
	// The same key on another order is a different request.
	other := b.createOrder()
	res := b.do(http.MethodPost, "/v1/orders/"+other+"/capture", "", "Idempotency-Key", "cap-1")
	if res.Status != http.StatusUnprocessableEntity || res.json(t)["code"] != "idempotency_key_reused" {
		t.Fatalf("key reused on another order = %d %s", res.Status, res.Body)
	}
	// A refund replay returns the refund, even after later refunds.
	r1 := b.do(http.MethodPost, "/v1/orders/"+id+"/refunds", `{"amount":100}`, "Idempotency-Key", "ref-1")
	b.do(http.MethodPost, "/v1/orders/"+id+"/refunds", `{"amount":100}`)
	r2 := b.do(http.MethodPost, "/v1/orders/"+id+"/refunds", `{"amount":100}`, "Idempotency-Key", "ref-1")
	if r1.Status != http.StatusCreated || r2.Status != http.StatusCreated || r2.Body != r1.Body {
		t.Fatalf("refund replay: %d %s / %d %s", r1.Status, r1.Body, r2.Status, r2.Body)
	}
	if o := b.order(id); o.Refunded != 200 {
		t.Fatalf("refunded = %d, want 200 (two refunds, one replay)", o.Refunded)
	}
}

// Concurrent requests with one key have one effect. Each gets the stored
// response (201, first or replayed) or 409 while the first is in flight.
func TestIdempotentConcurrentDuplicatesHaveOneEffect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 30
	results := make([]response, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i] = b.do(http.MethodPost, "/v1/payments", paymentBody, "Idempotency-Key", "dup-1")
		})
	}
	close(start)
	wg.Wait()

	var created []response
	count := map[int]int{}
	for _, r := range results {
		count[r.Status]++
		switch r.Status {
		case http.StatusCreated:
			created = append(created, r)
		case http.StatusConflict:
			if code := r.json(t)["code"]; code != "idempotency_key_in_flight" {
				t.Errorf("409 with code %v", code)
			}
		default:
			t.Errorf("unexpected response %d %s", r.Status, r.Body)
		}
	}
	t.Logf("statuses: %v", count)
	if len(created) == 0 {
		t.Fatal("no request succeeded")
	}
	for _, r := range created[1:] {
		if r.Body != created[0].Body {
			t.Fatalf("two different 201 bodies: %s and %s", created[0].Body, r.Body)
		}
	}
	if n := b.count("SELECT count(*) FROM orders"); n != 1 {
		t.Fatalf("orders = %d, want exactly 1", n)
	}
	if n := b.count("SELECT count(*) FROM outbox"); n != 1 {
		t.Fatalf("outbox rows = %d, want exactly 1", n)
	}
	if n := b.count("SELECT count(*) FROM idempotency_keys"); n != 1 {
		t.Fatalf("idempotency keys = %d, want 1", n)
	}

	// The other side: the same duplicates without a key are n payments.
	for range n {
		wg.Go(func() { b.do(http.MethodPost, "/v1/payments", paymentBody) })
	}
	wg.Wait()
	if got := b.count("SELECT count(*) FROM orders"); got != 1+n {
		t.Fatalf("orders without a key = %d, want %d: every duplicate is an effect", got-1, n)
	}
}
