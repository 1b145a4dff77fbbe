package bench

import (
	"encoding/json"
	"net/http"
	"strings"
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
	var answers [][]byte
	for range 2 {
		order, err := rawCapture(ctx, pool, ob, "order-events", "key-1", p)
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, order)
	}
	if answers[1] != nil {
		t.Errorf("the replay returned %s, want nothing", answers[1])
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
	var answer struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(answers[0], &answer); err != nil || answer.ID != orderID || answer.Status != "captured" {
		t.Errorf("the capture returned %s (%v), want order %s captured", answers[0], err, orderID)
	}
}

// B1's HTTP floor answers a payment with 201 and writes what B1 writes; a
// body that is not a payment gets 400 and writes nothing.
func TestFloorServerCapturesOverHTTP(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.NewPool(t, "orders")
	ctx := testenv.Context(t)
	ob, stop, err := newRawOutbox(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	url, closeServer, err := floorServer(pool, ob)
	if err != nil {
		t.Fatal(err)
	}
	defer closeServer()
	client := captureClient(2)
	defer client.CloseIdleConnections()
	p := loadgen.Payment{CustomerID: "cus_1", MerchantID: "mer_2", Amount: 1999, Currency: "EUR"}
	if err := postPayment(ctx, client, url, "key-1", floorKeys(), p); err != nil {
		t.Fatal(err)
	}
	res, err := client.Post(url+"/v1/payments", "application/json", strings.NewReader("{"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("a broken body got %s, want 400", res.Status)
	}
	var orders, events int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders WHERE merchant_id = 'mer_2'), (SELECT count(*) FROM outbox)`).Scan(&orders, &events); err != nil {
		t.Fatal(err)
	}
	if orders != 1 || events != 1 {
		t.Errorf("orders of mer_2 %d, outbox rows %d; want 1, 1", orders, events)
	}
}
