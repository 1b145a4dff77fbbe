package reconcile

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
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

func TestSinceCountsTheOutboxRowsLeftPendingSinceTheBase(t *testing.T) {
	t.Parallel()
	at := func(s int) time.Time { return time.Date(2025, 1, 1, 0, 0, s, 0, time.UTC) }
	// Row 5 was already stuck at the base; the scenario inserted rows 11 to
	// 20 and left 12 and 13 pending, 13 held by a relay.
	base := Report{Settled: true, Outbox: newBacklog([]pendingRow{{id: 5, inserted: at(5)}}, 10)}
	after := Report{Settled: true, Outbox: newBacklog([]pendingRow{
		{id: 5, inserted: at(5)}, {id: 12, inserted: at(12), attempts: 1}, {id: 13, inserted: at(13), held: true},
	}, 20)}
	got := after.Since(base).Outbox
	if got.Pending != 2 || got.Held != 1 || !slices.Equal(got.IDs, []int64{12, 13}) || !got.Oldest.Equal(at(12)) || got.HighWater != 20 {
		t.Fatalf("Since: outbox %+v; want rows 12 and 13 only", got)
	}
	if v := base.Violations(); len(v) != 1 || !strings.HasPrefix(v[0], "1 outbox row left pending after the pipeline settled: ids 5, ") {
		t.Fatalf("the base's violations %q do not name row 5", v)
	}
	// A state is not a count: rows that drained do not offset rows left.
	drained := Report{Settled: true, Outbox: newBacklog([]pendingRow{{id: 21, inserted: at(21)}}, 30)}
	if got := drained.Since(after).Outbox; got.Pending != 1 || !slices.Equal(got.IDs, []int64{21}) {
		t.Fatalf("Since after three rows drained and one was left: outbox %+v; want row 21", got)
	}
	if got := after.Since(after).Outbox; got.Pending != 0 || len(after.Since(after).Violations()) != 0 {
		t.Fatalf("nothing happened, yet the outbox is %+v", got)
	}
}

func TestBacklogListsTheFirstIDsAndTheCountOfTheRest(t *testing.T) {
	t.Parallel()
	var rows []pendingRow
	for id := int64(101); id <= 116; id++ {
		rows = append(rows, pendingRow{id: id, inserted: time.Date(2025, 1, 1, 0, 0, int(id-100), 0, time.UTC)})
	}
	r := Report{Settled: true, Outbox: newBacklog(rows, 116)}
	want := "16 outbox rows left pending after the pipeline settled: ids 101, 102, 103, 104, 105, 106, 107, 108, 109, 110 and 6 more, oldest inserted 2025-01-01T00:00:01Z"
	if got := r.OutboxLeftPending(); got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	r.Settled = false
	if got := r.OutboxLeftPending(); !strings.HasPrefix(got, "16 outbox rows left pending when settling gave up (0 held by a relay or waiting out a retry backoff): ids 101,") {
		t.Fatalf("unsettled: %q", got)
	}
	if got := (Report{Settled: true}).OutboxLeftPending(); got != "" {
		t.Fatalf("an empty outbox: %q", got)
	}
}
