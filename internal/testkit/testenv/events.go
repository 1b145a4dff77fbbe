package testenv

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/paylab/paylab/pkg/outbox"
)

// OrderCaptured builds an order's OrderCaptured event (sequence 1) as the
// orders service writes it (docs/events.md).
func OrderCaptured(orderID, customer, merchant string, amount int64, currency string) *outbox.Event {
	return OrderEvent(orderID, 1, "OrderCaptured", map[string]any{
		"order_id": orderID, "customer_id": customer, "merchant_id": merchant,
		"amount": amount, "currency": currency, "captured_at": time.Now().UTC(),
	})
}

// OrderRefunded builds an order's OrderRefunded event with sequence seq.
func OrderRefunded(orderID string, seq, amount int64, currency string) *outbox.Event {
	return OrderEvent(orderID, seq, "OrderRefunded", map[string]any{
		"order_id": orderID, "refund_id": uuid.NewString(), "amount": amount, "currency": currency,
		"refunded_at": time.Now().UTC(),
	})
}

// OrderEvent builds an order event of type typ whose payload is data plus
// its schema version and sequence.
func OrderEvent(orderID string, seq int64, typ string, data map[string]any) *outbox.Event {
	data["schema_version"], data["sequence"] = 1, seq
	payload, _ := json.Marshal(data)
	return &outbox.Event{
		ID: uuid.Must(uuid.NewV7()), AggregateType: "order", AggregateID: orderID, Type: typ,
		SchemaVersion: 1, Sequence: seq, Payload: payload, OccurredAt: time.Now(),
	}
}
