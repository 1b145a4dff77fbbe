package orderhttp

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/paylab/paylab/services/orders/internal/order"
)

// orderJSON is an order on the wire.
type orderJSON struct {
	ID             string    `json:"id"`
	Status         string    `json:"status"`
	CustomerID     string    `json:"customer_id"`
	MerchantID     string    `json:"merchant_id"`
	Amount         int64     `json:"amount"`
	Currency       string    `json:"currency"`
	CapturedAmount int64     `json:"captured_amount"`
	RefundedAmount int64     `json:"refunded_amount"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// refundJSON is a refund on the wire.
type refundJSON struct {
	ID        string    `json:"id"`
	OrderID   string    `json:"order_id"`
	Amount    int64     `json:"amount"`
	Currency  string    `json:"currency"`
	CreatedAt time.Time `json:"created_at"`
}

func renderOrder(v any) any {
	o := v.(order.Order)
	return orderJSON{
		ID: o.ID.String(), Status: string(o.Status), CustomerID: o.CustomerID, MerchantID: o.MerchantID,
		Amount: o.Amount, Currency: o.Currency, CapturedAmount: o.CapturedAmount, RefundedAmount: o.RefundedAmount,
		CreatedAt: o.CreatedAt.UTC(), UpdatedAt: o.UpdatedAt.UTC(),
	}
}

func renderRefund(v any) any {
	r := v.(order.Refund)
	return refundJSON{ID: r.ID.String(), OrderID: r.OrderID.String(), Amount: r.Amount, Currency: r.Currency, CreatedAt: r.CreatedAt.UTC()}
}

func encodeBody(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// writeBody writes a JSON response body.
func writeBody(w http.ResponseWriter, status int, body []byte, replayed bool) {
	w.Header().Set("Content-Type", "application/json")
	if replayed {
		w.Header().Set(HeaderIdempotencyReplayed, "true")
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
