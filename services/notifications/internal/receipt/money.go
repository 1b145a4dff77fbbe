package receipt

import "fmt"

// zeroDecimal lists ISO 4217 currencies without minor units (amounts are
// whole units); every other currency is shown with two decimals.
var zeroDecimal = map[string]bool{"JPY": true, "KRW": true, "VND": true, "CLP": true, "ISK": true}

// Money formats an amount in minor units, e.g. Money(1999, "EUR") = "19.99 EUR".
func Money(minor int64, currency string) string {
	if zeroDecimal[currency] {
		return fmt.Sprintf("%d %s", minor, currency)
	}
	sign := ""
	if minor < 0 {
		sign, minor = "-", -minor
	}
	return fmt.Sprintf("%s%d.%02d %s", sign, minor/100, minor%100, currency)
}
