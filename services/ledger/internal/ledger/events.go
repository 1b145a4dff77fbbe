// Package ledger is the ledger's domain: it turns order events into balanced
// journal entries (double-entry bookkeeping) inside the inbox's transaction.
package ledger

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/paylab/paylab/pkg/inbox"
)

// Event types the ledger applies.
const (
	TypeOrderCaptured = "OrderCaptured"
	TypeOrderRefunded = "OrderRefunded"
)

// Captured is the OrderCaptured payload (docs/events.md).
type Captured struct {
	OrderID    string `json:"order_id"`
	CustomerID string `json:"customer_id"`
	MerchantID string `json:"merchant_id"`
	Amount     int64  `json:"amount"`
	Currency   string `json:"currency"`
}

// Refunded is the OrderRefunded payload (docs/events.md).
type Refunded struct {
	OrderID  string `json:"order_id"`
	RefundID string `json:"refund_id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

var currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)

// decode parses a payload; a payload that cannot be applied is a permanent
// error (the event is dead-lettered, not retried).
func decode(msg inbox.Message, v any) error {
	dec := json.NewDecoder(bytes.NewReader(msg.Data))
	if err := dec.Decode(v); err != nil {
		return inbox.Permanent(fmt.Errorf("decoding %s payload: %w", msg.Type, err))
	}
	return nil
}

func validate(orderID string, amount int64, currency string, parties ...string) error {
	switch {
	case orderID == "":
		return inbox.Permanent(fmt.Errorf("order_id is empty"))
	case amount <= 0:
		return inbox.Permanent(fmt.Errorf("amount %d is not positive", amount))
	case !currencyCode.MatchString(currency):
		return inbox.Permanent(fmt.Errorf("currency %q is not an ISO 4217 code", currency))
	}
	for _, p := range parties {
		if p == "" {
			return inbox.Permanent(fmt.Errorf("customer_id or merchant_id is empty"))
		}
	}
	return nil
}
