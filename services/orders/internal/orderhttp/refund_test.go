package orderhttp_test

import (
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/paylab/paylab/services/orders/internal/orderapp"
)

func TestRefundsPartialThenFull(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.placePayment()

	res := b.do(http.MethodPost, "/v1/orders/"+id+"/refunds", `{"amount":500}`, "traceparent", traceparent)
	if res.Status != http.StatusCreated {
		t.Fatalf("refund = %d %s", res.Status, res.Body)
	}
	refund := res.json(t)
	if got, want := keys(refund), []string{"amount", "created_at", "currency", "id", "order_id"}; !reflect.DeepEqual(got, want) {
		t.Errorf("refund members = %v, want %v", got, want)
	}
	if refund["order_id"] != id || refund["amount"] != 500.0 || refund["currency"] != "EUR" {
		t.Errorf("refund = %v", refund)
	}
	if o := b.order(id); o.Status != "partially_refunded" || o.Refunded != 500 || o.Seq != 2 {
		t.Errorf("order after a partial refund = %+v", o)
	}

	res = b.do(http.MethodPost, "/v1/orders/"+id+"/refunds", `{"amount":1499}`)
	if res.Status != http.StatusCreated {
		t.Fatalf("second refund = %d %s", res.Status, res.Body)
	}
	if o := b.order(id); o.Status != "refunded" || o.Refunded != 1999 || o.Seq != 3 {
		t.Errorf("order after the full refund = %+v", o)
	}
	got := b.do(http.MethodGet, "/v1/orders/"+id, "").json(t)
	if got["status"] != "refunded" || got["refunded_amount"] != 1999.0 {
		t.Errorf("GET after refunds = %v", got)
	}

	rows := b.outbox(id)
	if len(rows) != 3 {
		t.Fatalf("outbox rows = %d, want 3 (capture and two refunds)", len(rows))
	}
	for i, want := range []struct {
		typ    string
		amount float64
	}{{"OrderCaptured", 1999}, {"OrderRefunded", 500}, {"OrderRefunded", 1499}} {
		r := rows[i]
		if r.EventType != want.typ || r.Sequence != int64(i+1) || r.Payload["amount"] != want.amount ||
			r.Payload["sequence"] != float64(i+1) || !r.Pending {
			t.Errorf("outbox row %d = %+v, want %s of %v with sequence %d", i, r, want.typ, want.amount, i+1)
		}
	}
	wantPayload := []string{"amount", "currency", "order_id", "refund_id", "refunded_at", "schema_version", "sequence"}
	if got := keys(rows[1].Payload); !reflect.DeepEqual(got, wantPayload) {
		t.Errorf("OrderRefunded payload members = %v, want %v", got, wantPayload)
	}
	if rows[1].Payload["refund_id"] != refund["id"] || rows[1].Payload["refunded_at"] != refund["created_at"] {
		t.Errorf("OrderRefunded payload %v does not match the refund %v", rows[1].Payload, refund)
	}
	if rows[1].Headers["traceparent"] != traceparent {
		t.Errorf("refund event headers = %v", rows[1].Headers)
	}

	// Nothing is left to refund.
	res = b.do(http.MethodPost, "/v1/orders/"+id+"/refunds", `{"amount":1}`)
	if res.Status != http.StatusUnprocessableEntity || res.json(t)["code"] != "refund_exceeds_captured" {
		t.Fatalf("refund of a refunded order = %d %s", res.Status, res.Body)
	}
	if n := b.count("SELECT count(*) FROM refunds WHERE order_id = $1", id); n != 2 {
		t.Errorf("refund rows = %d, want 2", n)
	}
}

func TestRefundRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	authorized := b.createOrder()
	res := b.do(http.MethodPost, "/v1/orders/"+authorized+"/refunds", `{"amount":100}`)
	if res.Status != http.StatusConflict || res.json(t)["code"] != "order_not_refundable" {
		t.Errorf("refund of an authorized order = %d %s", res.Status, res.Body)
	}
	captured := b.placePayment()
	res = b.do(http.MethodPost, "/v1/orders/"+captured+"/refunds", `{"amount":2000}`)
	if res.Status != http.StatusUnprocessableEntity || res.json(t)["code"] != "refund_exceeds_captured" {
		t.Errorf("refund above the captured amount = %d %s", res.Status, res.Body)
	}
	if o := b.order(captured); o.Status != "captured" || o.Refunded != 0 || o.Seq != 1 {
		t.Errorf("order changed by refused refunds: %+v", o)
	}
	if n := b.count("SELECT count(*) FROM outbox WHERE event_type = 'OrderRefunded'"); n != 0 {
		t.Errorf("OrderRefunded rows = %d, want 0", n)
	}
}

func TestRefundErrorBeforeCommitLeavesNeitherChangeNorEvent(t *testing.T) {
	t.Parallel()
	var armed atomic.Bool
	b := setup(t, func(c *orderapp.Config) { c.Hooks.BeforeCommit = failing(orderapp.OpRefund, &armed) })
	id := b.placePayment()

	armed.Store(true)
	res := b.do(http.MethodPost, "/v1/orders/"+id+"/refunds", `{"amount":500}`)
	if res.Status != http.StatusServiceUnavailable {
		t.Fatalf("refund with a failure before commit = %d %s", res.Status, res.Body)
	}
	if o := b.order(id); o.Status != "captured" || o.Refunded != 0 || o.Seq != 1 {
		t.Errorf("order changed although the transaction failed: %+v", o)
	}
	if n := b.count("SELECT count(*) FROM refunds"); n != 0 {
		t.Errorf("refund rows = %d, want 0", n)
	}
	if rows := b.outbox(id); len(rows) != 1 || rows[0].EventType != "OrderCaptured" {
		t.Fatalf("outbox = %+v, want only the capture", rows)
	}

	armed.Store(false)
	if res := b.do(http.MethodPost, "/v1/orders/"+id+"/refunds", `{"amount":500}`); res.Status != http.StatusCreated {
		t.Fatalf("refund = %d %s", res.Status, res.Body)
	}
	if rows := b.outbox(id); len(rows) != 2 || rows[1].EventType != "OrderRefunded" || rows[1].Sequence != 2 {
		t.Fatalf("outbox = %+v, want the capture and one refund", rows)
	}
}

// Concurrent refunds of one order never exceed the captured amount, and
// their sequence numbers have no gaps and no duplicates.
func TestConcurrentRefundsNeverExceedCaptured(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.placePayment() // 1999 captured

	const n = 20
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			statuses[i] = b.do(http.MethodPost, "/v1/orders/"+id+"/refunds", `{"amount":300}`).Status
		})
	}
	wg.Wait()
	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	if count[http.StatusCreated] != 6 || count[http.StatusUnprocessableEntity] != n-6 {
		t.Fatalf("statuses = %v, want six 201 (6 × 300 ≤ 1999) and the rest 422", count)
	}
	if o := b.order(id); o.Refunded != 1800 || o.Status != "partially_refunded" || o.Seq != 7 {
		t.Fatalf("order = %+v", o)
	}
	rows := b.outbox(id)
	for i, r := range rows {
		if r.Sequence != int64(i+1) {
			t.Fatalf("sequences = %v, want 1..7", fmt.Sprint(rows))
		}
	}
	if len(rows) != 7 {
		t.Fatalf("outbox rows = %d, want 7", len(rows))
	}
}
