package orderhttp

import (
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/paylab/paylab/services/orders/internal/order"
)

// parseNewOrder decodes and validates the body of POST /v1/payments and
// POST /v1/orders: {"customer_id","merchant_id","amount","currency"}.
// merchant is the merchant of the request's API key: it is the order's
// merchant, and a merchant_id in the body, which may be left out, must be
// the same (else 403 merchant_mismatch).
func parseNewOrder(data []byte, merchant string) (order.NewOrder, error) {
	var (
		customer, given, currency *string
		amount                    *int64
	)
	err := decodeObject(data,
		field{"customer_id", &customer, "a string"},
		field{"merchant_id", &given, "a string"},
		field{"amount", &amount, "an integer number of minor units"},
		field{"currency", &currency, "a string"},
	)
	if err != nil {
		return order.NewOrder{}, err
	}
	n := order.NewOrder{CustomerID: deref(customer), MerchantID: merchant, Amount: deref(amount), Currency: deref(currency)}
	if given != nil {
		n.MerchantID = *given
	}
	present := map[string]bool{"customer_id": customer != nil, "merchant_id": true, "amount": amount != nil, "currency": currency != nil}
	if err := requireFields(n.Validate(), present, "customer_id", "merchant_id", "amount", "currency"); err != nil {
		return order.NewOrder{}, err
	}
	if n.MerchantID != merchant {
		return order.NewOrder{}, badRequest(http.StatusForbidden, "merchant_mismatch",
			"The merchant_id of the body is not the merchant of the API key; leave it out or send the key's.",
			FieldIssue{Field: "merchant_id", Message: "is not the merchant of the API key"})
	}
	return n, nil
}

// requireFields reports, in the order of names, "is required" for each
// field that was absent (or null) and the validation error of the others.
func requireFields(validation error, present map[string]bool, names ...string) error {
	var errs []error
	for _, name := range names {
		if !present[name] {
			errs = append(errs, order.Missing(name))
			continue
		}
		if ve, ok := validation.(*order.ValidationError); ok {
			for _, f := range ve.Fields {
				if f.Field == name {
					errs = append(errs, order.Invalid(f.Field, f.Message))
				}
			}
		}
	}
	return order.Join(errs...)
}

// parseNewRefund decodes and validates the body of POST
// /v1/orders/{id}/refunds: {"amount"}.
func parseNewRefund(data []byte) (order.NewRefund, error) {
	var amount *int64
	if err := decodeObject(data, field{"amount", &amount, "an integer number of minor units"}); err != nil {
		return order.NewRefund{}, err
	}
	if amount == nil {
		return order.NewRefund{}, order.Missing("amount")
	}
	n := order.NewRefund{Amount: *amount}
	return n, n.Validate()
}

// parseCapture decodes the optional body of POST /v1/orders/{id}/capture:
// nothing, or an empty JSON object (a capture is always of the full amount).
func parseCapture(data []byte) error {
	if data == nil {
		return nil
	}
	return decodeObject(data)
}

// parseOrderID validates an order id: a UUIDv7 in its 36-character text
// form (either case).
func parseOrderID(s string) (uuid.UUID, error) {
	invalid := badRequest(http.StatusBadRequest, "order_id_invalid",
		"An order id is a UUIDv7 in its 36-character form, e.g. 0193a5c2-7f3e-7b1a-9c1d-3e5f7a9b1c2d.",
		FieldIssue{Field: "id", Message: "must be a UUIDv7"})
	if len(s) != 36 {
		return uuid.Nil, invalid
	}
	id, err := uuid.Parse(s)
	if err != nil || id.String() != strings.ToLower(s) || id.Version() != 7 || id.Variant() != uuid.RFC4122 {
		return uuid.Nil, invalid
	}
	return id, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
