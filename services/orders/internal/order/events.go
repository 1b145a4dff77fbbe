package order

import (
	"time"
)

// The events an order emits, as documented in docs/events.md.
const (
	AggregateType      = "order"
	EventOrderCaptured = "OrderCaptured"
	EventOrderRefunded = "OrderRefunded"
	// SchemaVersion is the version of the payloads below.
	SchemaVersion = 1
)

// Captured is the payload of OrderCaptured, the first event of an order.
type Captured struct {
	SchemaVersion int       `json:"schema_version"`
	Sequence      int64     `json:"sequence"`
	OrderID       string    `json:"order_id"`
	CustomerID    string    `json:"customer_id"`
	MerchantID    string    `json:"merchant_id"`
	Amount        int64     `json:"amount"`
	Currency      string    `json:"currency"`
	CapturedAt    time.Time `json:"captured_at"`
}

// Refunded is the payload of OrderRefunded, one per refund; its sequence is
// always greater than the order's capture.
type Refunded struct {
	SchemaVersion int       `json:"schema_version"`
	Sequence      int64     `json:"sequence"`
	OrderID       string    `json:"order_id"`
	RefundID      string    `json:"refund_id"`
	Amount        int64     `json:"amount"`
	Currency      string    `json:"currency"`
	RefundedAt    time.Time `json:"refunded_at"`
}

// CapturedEvent is the payload announcing the capture of o. o must be the
// order as the capture left it: its EventSeq is the capture's sequence.
func CapturedEvent(o Order) Captured {
	return Captured{
		SchemaVersion: SchemaVersion,
		Sequence:      o.EventSeq,
		OrderID:       o.ID.String(),
		CustomerID:    o.CustomerID,
		MerchantID:    o.MerchantID,
		Amount:        o.CapturedAmount,
		Currency:      o.Currency,
		CapturedAt:    o.UpdatedAt.UTC(),
	}
}

// RefundedEvent is the payload announcing refund r of o, where o is the
// order as the refund left it.
func RefundedEvent(o Order, r Refund) Refunded {
	return Refunded{
		SchemaVersion: SchemaVersion,
		Sequence:      o.EventSeq,
		OrderID:       o.ID.String(),
		RefundID:      r.ID.String(),
		Amount:        r.Amount,
		Currency:      r.Currency,
		RefundedAt:    r.CreatedAt.UTC(),
	}
}
