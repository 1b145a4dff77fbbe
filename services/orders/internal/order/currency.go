package order

// Currency is an ISO 4217 currency this service accepts.
type Currency struct {
	Code string
	// Exponent is the number of digits of the minor unit: 2 for EUR (cents),
	// 0 for JPY (amounts are whole yen).
	Exponent int
}

// MaxMajorUnits bounds an order's amount: at most one million major units
// (EUR 1,000,000.00 = 100000000 minor units; JPY 1,000,000 = 1000000).
const MaxMajorUnits = 1_000_000

var currencies = map[string]Currency{
	"EUR": {Code: "EUR", Exponent: 2},
	"USD": {Code: "USD", Exponent: 2},
	"GBP": {Code: "GBP", Exponent: 2},
	"CHF": {Code: "CHF", Exponent: 2},
	"JPY": {Code: "JPY", Exponent: 0},
}

// LookupCurrency returns the supported currency with the given code
// (upper case, exact).
func LookupCurrency(code string) (Currency, bool) {
	c, ok := currencies[code]
	return c, ok
}

// MaxAmount is the largest amount, in minor units, an order in c may have.
func (c Currency) MaxAmount() int64 {
	max := int64(MaxMajorUnits)
	for range c.Exponent {
		max *= 10
	}
	return max
}
