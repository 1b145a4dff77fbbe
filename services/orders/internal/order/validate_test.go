package order

import (
	"errors"
	"strings"
	"testing"
)

func TestCurrencyBounds(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]int64{"EUR": 100_000_000, "USD": 100_000_000, "GBP": 100_000_000, "JPY": 1_000_000} {
		c, ok := LookupCurrency(code)
		if !ok || c.MaxAmount() != want {
			t.Errorf("%s: supported %v, max %d, want %d", code, ok, c.MaxAmount(), want)
		}
	}
	if c, _ := LookupCurrency("JPY"); c.Exponent != 0 {
		t.Errorf("JPY exponent = %d, want 0", c.Exponent)
	}
	for _, code := range []string{"", "eur", "EURO", "XXX", "BTC"} {
		if _, ok := LookupCurrency(code); ok {
			t.Errorf("%q is supported", code)
		}
	}
}

func TestNewOrderValidate(t *testing.T) {
	t.Parallel()
	ok := NewOrder{CustomerID: "cus_42", MerchantID: "mer_7", Amount: 1999, Currency: "EUR"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func(*NewOrder)
		fields string
	}{
		{"zero amount", func(n *NewOrder) { n.Amount = 0 }, "amount"},
		{"JPY above bound", func(n *NewOrder) { n.Currency, n.Amount = "JPY", 1_000_001 }, "amount"},
		{"long customer", func(n *NewOrder) { n.CustomerID = strings.Repeat("c", 65) }, "customer_id"},
		{"merchant starts with _", func(n *NewOrder) { n.MerchantID = "_m" }, "merchant_id"},
		{"several", func(n *NewOrder) { n.CustomerID, n.Currency = "", "eur" }, "customer_id,currency"},
	}
	for _, tt := range tests {
		n := ok
		tt.change(&n)
		var ve *ValidationError
		if err := n.Validate(); !errors.As(err, &ve) {
			t.Errorf("%s: err = %v", tt.name, err)
			continue
		}
		var got []string
		for _, f := range ve.Fields {
			got = append(got, f.Field)
			if f.Code != f.Field+"_invalid" {
				t.Errorf("%s: code %s", tt.name, f.Code)
			}
		}
		if strings.Join(got, ",") != tt.fields {
			t.Errorf("%s: fields %v, want %s", tt.name, got, tt.fields)
		}
	}
}
