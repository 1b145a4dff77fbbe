package reconcile

import (
	"reflect"
	"testing"
)

func TestSinceCountsOnlyWhatHappenedAfterTheBase(t *testing.T) {
	t.Parallel()
	// A deployment that already lost one effect and saw 3 duplicates on the
	// wire; then 10 captures, 1 refund, 2 more wire duplicates, and a
	// refund applied out of order.
	base := Report{
		Captures: 5, Refunds: 1,
		Ledger:        Effects{Expected: 6, Applied: 5, Lost: 1},
		Notifications: Effects{Expected: 6, Applied: 6, Duplicate: 1},
		Unbalanced:    map[string]int{"EUR": 100},
		InboxAbsorbed: 3,
		Wire:          &Wire{Messages: 9, Distinct: 6, Duplicates: 3},
	}
	after := Report{
		Captures: 15, Refunds: 2,
		Ledger:        Effects{Expected: 17, Applied: 16, Lost: 1, OutOfOrder: 1},
		Notifications: Effects{Expected: 17, Applied: 17, Duplicate: 1},
		Unbalanced:    map[string]int{"EUR": 100, "USD": -5},
		Wire:          &Wire{Messages: 22, Distinct: 17, Duplicates: 5, OutOfOrder: 1},
	}
	after.InboxAbsorbed = after.Wire.Duplicates
	want := Report{
		Captures: 10, Refunds: 1,
		Ledger:        Effects{Expected: 11, Applied: 11, OutOfOrder: 1},
		Notifications: Effects{Expected: 11, Applied: 11},
		Unbalanced:    map[string]int{"USD": -5},
		InboxAbsorbed: 2,
		Wire:          &Wire{Messages: 13, Distinct: 11, Duplicates: 2, OutOfOrder: 1},
	}
	got := after.Since(base)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Since:\n got %+v %+v\nwant %+v %+v", got, *got.Wire, want, *want.Wire)
	}
	v := got.Violations()
	if len(v) != 3 {
		t.Fatalf("violations %q: want the new out-of-order refund, its out-of-order event on the topic and the USD imbalance only", v)
	}
	if clean := after.Since(after); len(clean.Violations()) != 0 || clean.Captures != 0 || clean.Unbalanced != nil {
		t.Fatalf("nothing happened, yet Since = %+v", clean)
	}
	if !reflect.DeepEqual(after.Since(Report{}), after) {
		t.Fatalf("Since an empty base changed the report: %+v", after.Since(Report{}))
	}
}
