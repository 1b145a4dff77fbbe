package receipt

import "testing"

func TestMoney(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		minor    int64
		currency string
		want     string
	}{
		{1999, "EUR", "19.99 EUR"},
		{5, "USD", "0.05 USD"},
		{-250, "EUR", "-2.50 EUR"},
		{1200, "JPY", "1200 JPY"},
	} {
		if got := Money(tc.minor, tc.currency); got != tc.want {
			t.Errorf("Money(%d, %s) = %q, want %q", tc.minor, tc.currency, got, tc.want)
		}
	}
}
