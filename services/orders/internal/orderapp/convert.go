package orderapp

import (
	"github.com/google/uuid"

	"github.com/paylab/paylab/services/orders/internal/order"
	"github.com/paylab/paylab/services/orders/internal/orderdb"
)

// FromDB is the order a row of the orders table holds.
func FromDB(r orderdb.Order) order.Order {
	return order.Order{
		ID:             r.ID,
		CustomerID:     r.CustomerID,
		MerchantID:     r.MerchantID,
		Amount:         r.Amount,
		Currency:       r.Currency,
		Status:         order.Status(r.Status),
		CapturedAmount: r.CapturedAmount,
		RefundedAmount: r.RefundedAmount,
		EventSeq:       r.EventSeq,
		Version:        r.Version,
		CreatedAt:      r.CreatedAt.UTC(),
		UpdatedAt:      r.UpdatedAt.UTC(),
	}
}

// newID returns a UUIDv7: time-ordered, so new rows land at the end of the
// primary key's index. uuid.NewV7 fails only when the system's random source
// does, and then nothing sensible can continue.
func newID() uuid.UUID {
	return uuid.Must(uuid.NewV7())
}
