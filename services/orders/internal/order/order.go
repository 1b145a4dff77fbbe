package order

import (
	"time"

	"github.com/google/uuid"
)

// Status is where an order's payment stands.
type Status string

// The statuses of an order. An order is created authorized, captured once
// (in full), then refunded in one or more parts.
const (
	StatusAuthorized        Status = "authorized"
	StatusCaptured          Status = "captured"
	StatusPartiallyRefunded Status = "partially_refunded"
	StatusRefunded          Status = "refunded"
)

// Order is a payment order. Amounts are integers in the currency's minor
// unit (cents; yen for JPY).
type Order struct {
	ID             uuid.UUID
	CustomerID     string
	MerchantID     string
	Amount         int64
	Currency       string
	Status         Status
	CapturedAmount int64
	RefundedAmount int64
	// EventSeq is the sequence number of the last event the order emitted.
	EventSeq  int64
	Version   int32
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Refund is one refund of a captured order.
type Refund struct {
	ID        uuid.UUID
	OrderID   uuid.UUID
	Amount    int64
	Currency  string
	CreatedAt time.Time
}

// NewOrder is what a client asks for when it places an order or a payment.
type NewOrder struct {
	CustomerID string
	MerchantID string
	Amount     int64
	Currency   string
}

// NewRefund is what a client asks for when it refunds an order.
type NewRefund struct {
	Amount int64
}
