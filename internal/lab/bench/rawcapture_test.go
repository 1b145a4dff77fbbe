package bench

import (
	"encoding/json"
	"testing"

	"github.com/paylab/paylab/internal/lab/loadgen"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// One raw capture writes what the API writes: a captured order, its
// OrderCaptured outbox row, and the idempotency key; the same key again
// writes nothing.
func TestRawCaptureWritesOrderEventAndKeyOnce(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.NewPool(t, "orders")
	ctx := testenv.Context(t)
	p := loadgen.Payment{CustomerID: "cus_1", MerchantID: "mer_2", Amount: 1999, Currency: "EUR"}
	ob, stop, err := newRawOutbox(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for range 2 {
		if err := rawCapture(ctx, pool, ob, "order-events", "key-1", p); err != nil {
			t.Fatal(err)
		}
	}
	var (
		orders, events, keys int
		status, orderID      string
		payload              []byte
	)
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM outbox),
		(SELECT count(*) FROM idempotency_keys WHERE scope = $1 AND key = 'key-1')`, rawScope).Scan(&orders, &events, &keys); err != nil {
		t.Fatal(err)
	}
	if orders != 1 || events != 1 || keys != 1 {
		t.Fatalf("orders %d, outbox rows %d, keys %d; want 1, 1, 1", orders, events, keys)
	}
	if err := pool.QueryRow(ctx, `SELECT o.status, o.id::text, x.payload FROM orders o
		JOIN outbox x ON x.aggregate_id = o.id::text AND x.aggregate_type = 'order'
		 AND x.event_type = 'OrderCaptured' AND x.topic = 'order-events' AND x.sequence = 1`).
		Scan(&status, &orderID, &payload); err != nil {
		t.Fatal(err)
	}
	var ev struct {
		OrderID  string `json:"order_id"`
		Amount   int64  `json:"amount"`
		Currency string `json:"currency"`
		Sequence int64  `json:"sequence"`
	}
	if err := json.Unmarshal(payload, &ev); err != nil {
		t.Fatal(err)
	}
	if status != "captured" || ev.OrderID != orderID || ev.Amount != 1999 || ev.Currency != "EUR" || ev.Sequence != 1 {
		t.Errorf("order %s %s, event %+v", orderID, status, ev)
	}
}
