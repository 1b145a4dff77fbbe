package orderhttp_test

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/paylab/paylab/services/orders/internal/orderapp"
)

const (
	traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tracestate  = "congo=t61rcWkgMzE"
)

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestPlacePaymentCapturesWithOneOutboxEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res := b.do(http.MethodPost, "/v1/payments", paymentBody, "traceparent", traceparent, "tracestate", tracestate)
	if res.Status != http.StatusCreated {
		t.Fatalf("status = %d, want 201: %s", res.Status, res.Body)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	body := res.json(t)
	wantKeys := []string{"amount", "captured_amount", "created_at", "currency", "customer_id", "id", "merchant_id", "refunded_amount", "status", "updated_at"}
	if got := keys(body); !reflect.DeepEqual(got, wantKeys) {
		t.Errorf("order members = %v, want %v", got, wantKeys)
	}
	id := body["id"].(string)
	if u, err := uuid.Parse(id); err != nil || u.Version() != 7 {
		t.Errorf("id %q is not a UUIDv7", id)
	}
	if body["status"] != "captured" || body["amount"] != 1999.0 || body["captured_amount"] != 1999.0 ||
		body["refunded_amount"] != 0.0 || body["currency"] != "EUR" || body["customer_id"] != "cus_42" || body["merchant_id"] != "mer_7" {
		t.Errorf("order = %v", body)
	}

	rows := b.outbox(id)
	if len(rows) != 1 {
		t.Fatalf("outbox rows = %d, want exactly 1", len(rows))
	}
	r := rows[0]
	if r.EventType != "OrderCaptured" || r.Sequence != 1 || r.Topic != testTopic || !r.Pending {
		t.Errorf("outbox row = %+v", r)
	}
	wantPayload := []string{"amount", "captured_at", "currency", "customer_id", "merchant_id", "order_id", "schema_version", "sequence"}
	if got := keys(r.Payload); !reflect.DeepEqual(got, wantPayload) {
		t.Errorf("payload members = %v, want %v", got, wantPayload)
	}
	if r.Payload["order_id"] != id || r.Payload["amount"] != 1999.0 || r.Payload["sequence"] != 1.0 || r.Payload["schema_version"] != 1.0 {
		t.Errorf("payload = %v", r.Payload)
	}
	if r.Payload["captured_at"] != body["updated_at"] {
		t.Errorf("captured_at %v differs from the order's updated_at %v", r.Payload["captured_at"], body["updated_at"])
	}
	if want := map[string]string{"traceparent": traceparent, "tracestate": tracestate}; !reflect.DeepEqual(r.Headers, want) {
		t.Errorf("headers = %v, want %v", r.Headers, want)
	}
}

func TestCreateOrderIsAuthorizedAndEmitsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createOrder()
	res := b.do(http.MethodGet, "/v1/orders/"+id, "")
	if res.Status != http.StatusOK || res.json(t)["status"] != "authorized" || res.json(t)["captured_amount"] != 0.0 {
		t.Fatalf("GET = %d %s", res.Status, res.Body)
	}
	if n := len(b.outbox(id)); n != 0 {
		t.Fatalf("outbox rows = %d, want 0", n)
	}
}

func TestCaptureWritesOrderAndOneOutboxRow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createOrder()
	res := b.do(http.MethodPost, "/v1/orders/"+id+"/capture", "", "traceparent", "not-a-traceparent")
	if res.Status != http.StatusOK || res.json(t)["status"] != "captured" {
		t.Fatalf("capture = %d %s", res.Status, res.Body)
	}
	if o := b.order(id); o.Status != "captured" || o.Captured != 1999 || o.Seq != 1 || o.Version != 2 {
		t.Errorf("order row = %+v", o)
	}
	rows := b.outbox(id)
	if len(rows) != 1 || rows[0].EventType != "OrderCaptured" || rows[0].Sequence != 1 || !rows[0].Pending {
		t.Fatalf("outbox = %+v, want one pending OrderCaptured with sequence 1", rows)
	}
	if len(rows[0].Headers) != 0 {
		t.Errorf("a malformed traceparent was stored: %v", rows[0].Headers)
	}
	if n := b.count("SELECT count(*) FROM outbox WHERE dispatched_at IS NULL"); n != 1 {
		t.Errorf("pending outbox rows in the database = %d, want 1", n)
	}

	// A second capture is refused and records nothing.
	res = b.do(http.MethodPost, "/v1/orders/"+id+"/capture", "{}")
	if res.Status != http.StatusConflict || res.json(t)["code"] != "order_not_capturable" {
		t.Fatalf("second capture = %d %s", res.Status, res.Body)
	}
	if n := len(b.outbox(id)); n != 1 {
		t.Fatalf("outbox rows after a refused capture = %d, want 1", n)
	}
}

// failing returns a hook that fails for op while armed.
func failing(op orderapp.Op, armed *atomic.Bool) func(context.Context, orderapp.Op) error {
	return func(_ context.Context, got orderapp.Op) error {
		if got == op && armed.Load() {
			return errors.New("injected failure")
		}
		return nil
	}
}

func TestCaptureErrorBeforeCommitLeavesNeitherChangeNorEvent(t *testing.T) {
	t.Parallel()
	var armed atomic.Bool
	b := setup(t, func(c *orderapp.Config) { c.Hooks.BeforeCommit = failing(orderapp.OpCapture, &armed) })
	id := b.createOrder()

	armed.Store(true)
	res := b.do(http.MethodPost, "/v1/orders/"+id+"/capture", "")
	if res.Status != http.StatusServiceUnavailable || res.json(t)["code"] != "fault_injected" {
		t.Fatalf("capture with a failure before commit = %d %s", res.Status, res.Body)
	}
	if o := b.order(id); o.Status != "authorized" || o.Captured != 0 || o.Seq != 0 || o.Version != 1 {
		t.Errorf("order changed although the transaction failed: %+v", o)
	}
	if n := b.count("SELECT count(*) FROM outbox"); n != 0 {
		t.Fatalf("outbox rows = %d, want 0", n)
	}

	// The same check passes once the failure is gone: the test can fail.
	armed.Store(false)
	if res := b.do(http.MethodPost, "/v1/orders/"+id+"/capture", ""); res.Status != http.StatusOK {
		t.Fatalf("capture = %d %s", res.Status, res.Body)
	}
	if n := b.count("SELECT count(*) FROM outbox"); n != 1 {
		t.Fatalf("outbox rows = %d, want 1", n)
	}
}

func TestPlacePaymentErrorBeforeCommitLeavesNothing(t *testing.T) {
	t.Parallel()
	var armed atomic.Bool
	armed.Store(true)
	b := setup(t, func(c *orderapp.Config) { c.Hooks.BeforeCommit = failing(orderapp.OpPlacePayment, &armed) })
	res := b.do(http.MethodPost, "/v1/payments", paymentBody, "Idempotency-Key", "k-1")
	if res.Status != http.StatusServiceUnavailable {
		t.Fatalf("status = %d %s", res.Status, res.Body)
	}
	for _, table := range []string{"orders", "outbox", "idempotency_keys"} {
		if n := b.count("SELECT count(*) FROM " + table); n != 0 {
			t.Errorf("%s rows = %d, want 0", table, n)
		}
	}
	// The key was not stored with the failed attempt, so a retry runs.
	armed.Store(false)
	res = b.do(http.MethodPost, "/v1/payments", paymentBody, "Idempotency-Key", "k-1")
	if res.Status != http.StatusCreated || res.Header.Get("Idempotency-Replayed") != "" {
		t.Fatalf("retry = %d %v %s", res.Status, res.Header, res.Body)
	}
}

func TestConcurrentCapturesExactlyOneWins(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.createOrder()

	const n = 50
	results := make([]response, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i] = b.do(http.MethodPost, "/v1/orders/"+id+"/capture", "")
		})
	}
	close(start)
	wg.Wait()

	count := map[int]int{}
	for _, r := range results {
		count[r.Status]++
		if r.Status == http.StatusConflict && r.json(t)["code"] != "order_not_capturable" {
			t.Errorf("409 with body %s", r.Body)
		}
	}
	if count[http.StatusOK] != 1 || count[http.StatusConflict] != n-1 {
		t.Fatalf("statuses = %v, want exactly one 200 and %d 409", count, n-1)
	}
	if rows := b.outbox(id); len(rows) != 1 {
		t.Fatalf("outbox rows = %d, want exactly 1", len(rows))
	}
	if o := b.order(id); o.Seq != 1 || o.Version != 2 {
		t.Fatalf("order = %+v, want one capture", o)
	}
}

func TestGetOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.placePayment()
	res := b.do(http.MethodGet, "/v1/orders/"+id, "")
	if res.Status != http.StatusOK || res.json(t)["id"] != id || res.json(t)["status"] != "captured" {
		t.Fatalf("GET = %d %s", res.Status, res.Body)
	}
	created, err := time.Parse(time.RFC3339Nano, res.json(t)["created_at"].(string))
	if err != nil || created.Location() != time.UTC {
		t.Errorf("created_at %v is not an RFC 3339 UTC time: %v", res.json(t)["created_at"], err)
	}
	missing := uuid.Must(uuid.NewV7()).String()
	res = b.do(http.MethodGet, "/v1/orders/"+missing, "")
	if res.Status != http.StatusNotFound || res.json(t)["code"] != "order_not_found" {
		t.Fatalf("GET unknown = %d %s", res.Status, res.Body)
	}
}
