package order

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
)

// MaxPartyIDLength bounds customer and merchant ids.
const MaxPartyIDLength = 64

// partyID is the shape of customer and merchant ids, e.g. "cus_42", "mer_7":
// an ASCII letter or digit, then letters, digits, '_' or '-'.
var partyID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

// Validate checks a new order; the error is a *ValidationError.
func (n NewOrder) Validate() error {
	var v ValidationError
	checkPartyID(&v, "customer_id", n.CustomerID)
	checkPartyID(&v, "merchant_id", n.MerchantID)
	cur, ok := LookupCurrency(n.Currency)
	if !ok {
		v.invalid("currency", fmt.Sprintf("must be one of the supported ISO 4217 codes %s", SupportedCurrencies()))
	}
	switch {
	case n.Amount <= 0:
		v.invalid("amount", "must be a positive integer in minor units")
	case ok && n.Amount > cur.MaxAmount():
		v.invalid("amount", fmt.Sprintf("must not exceed %d minor units of %s", cur.MaxAmount(), cur.Code))
	}
	return v.orNil()
}

// Validate checks a refund's own fields; whether it fits the order is decided
// against the order's state when it is applied.
func (n NewRefund) Validate() error {
	var v ValidationError
	if n.Amount <= 0 {
		v.invalid("amount", "must be a positive integer in minor units")
	} else if n.Amount > maxAnyAmount() {
		v.invalid("amount", fmt.Sprintf("must not exceed %d minor units", maxAnyAmount()))
	}
	return v.orNil()
}

func checkPartyID(v *ValidationError, field, id string) {
	switch {
	case id == "":
		v.invalid(field, "is required")
	case len(id) > MaxPartyIDLength:
		v.invalid(field, fmt.Sprintf("must be at most %d characters", MaxPartyIDLength))
	case !partyID.MatchString(id):
		v.invalid(field, "must be ASCII letters, digits, '_' or '-', starting with a letter or digit")
	}
}

// Missing reports a required field that the request did not carry.
func Missing(field string) error {
	var v ValidationError
	v.invalid(field, "is required")
	return &v
}

// Invalid reports one invalid field.
func Invalid(field, message string) error {
	var v ValidationError
	v.invalid(field, message)
	return &v
}

// Join merges validation errors, keeping the first error of each field.
func Join(errs ...error) error {
	var v ValidationError
	for _, err := range errs {
		if ve, ok := err.(*ValidationError); ok {
			for _, f := range ve.Fields {
				v.invalid(f.Field, f.Message)
			}
		}
	}
	return v.orNil()
}

// SupportedCurrencies lists the accepted currency codes, sorted.
func SupportedCurrencies() []string {
	return slices.Sorted(maps.Keys(currencies))
}

func maxAnyAmount() int64 {
	var m int64
	for _, c := range currencies {
		m = max(m, c.MaxAmount())
	}
	return m
}
