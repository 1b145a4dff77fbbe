// Package reconcile checks the end state of a run across paylab's three
// databases (and, optionally, the topic): for every committed capture and
// refund in the orders database, is there exactly one journal entry in the
// ledger and exactly one receipt in notifications? It counts what was lost,
// what appeared without a committed cause (phantom), what was applied twice,
// what was applied out of order, whether the ledger balances, and what the
// outbox has left pending.
package reconcile

import (
	"context"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"
)

// Sources are where the state lives.
type Sources struct {
	OrdersURL        string
	LedgerURL        string
	NotificationsURL string
	// Brokers and Topic, when set, make Check also read the topic and count
	// duplicates on the wire.
	Brokers []string
	Topic   string
}

// Effects compares what one consumer did with what the orders database says
// happened.
type Effects struct {
	Expected   int `json:"expected"`  // committed captures + refunds
	Applied    int `json:"applied"`   // distinct expected effects present
	Lost       int `json:"lost"`      // expected, absent
	Duplicate  int `json:"duplicate"` // present more than once (extra copies)
	Phantom    int `json:"phantom"`   // present without a committed cause
	OutOfOrder int `json:"out_of_order"`
}

// Report is the outcome of a check.
type Report struct {
	Captures      int            `json:"captures"`
	Refunds       int            `json:"refunds"`
	Ledger        Effects        `json:"ledger"`
	Notifications Effects        `json:"notifications"`
	Unbalanced    map[string]int `json:"unbalanced,omitempty"` // currency → non-zero sum of postings
	InboxAbsorbed int            `json:"inbox_absorbed"`       // duplicate deliveries the inboxes skipped (wire duplicates − duplicate effects)
	Outbox        Backlog        `json:"outbox"`
	// Settled is false when Settle's deadline passed first: the figures are
	// those of the last read.
	Settled bool  `json:"settled"`
	Wire    *Wire `json:"wire,omitempty"`
}

// OutboxLeftPending describes the outbox rows left pending, or is "" when
// there are none.
func (r Report) OutboxLeftPending() string { return r.Outbox.describe(r.Settled) }

// Violations lists what breaks the guarantees; empty means the run is clean.
func (r Report) Violations() []string {
	var v []string
	for _, e := range []struct {
		name string
		eff  Effects
	}{{"ledger", r.Ledger}, {"notifications", r.Notifications}} {
		if e.eff.Lost > 0 {
			v = append(v, fmt.Sprintf("%s: %d lost", e.name, e.eff.Lost))
		}
		if e.eff.Phantom > 0 {
			v = append(v, fmt.Sprintf("%s: %d phantom", e.name, e.eff.Phantom))
		}
		if e.eff.Duplicate > 0 {
			v = append(v, fmt.Sprintf("%s: %d duplicate effects", e.name, e.eff.Duplicate))
		}
		if e.eff.OutOfOrder > 0 {
			v = append(v, fmt.Sprintf("%s: %d applied out of order", e.name, e.eff.OutOfOrder))
		}
	}
	if r.Wire != nil && r.Wire.OutOfOrder > 0 {
		v = append(v, fmt.Sprintf("topic: %d events out of order within their partition", r.Wire.OutOfOrder))
	}
	currencies := make([]string, 0, len(r.Unbalanced))
	for c := range r.Unbalanced {
		currencies = append(currencies, c)
	}
	sort.Strings(currencies)
	for _, c := range currencies {
		v = append(v, fmt.Sprintf("ledger: postings in %s sum to %d, not 0", c, r.Unbalanced[c]))
	}
	if p := r.OutboxLeftPending(); p != "" {
		v = append(v, p)
	}
	return v
}

// key names one effect: an order's capture ("" refund) or one of its refunds.
type key struct{ order, refund string }

// checkDatabases compares the consumers' effects with the orders database
// and reads the outbox's backlog.
func checkDatabases(ctx context.Context, src Sources) (Report, error) {
	var r Report
	expected, err := committed(ctx, src.OrdersURL)
	if err != nil {
		return r, err
	}
	for k := range expected {
		if k.refund == "" {
			r.Captures++
		} else {
			r.Refunds++
		}
	}
	if r.Ledger, r.Unbalanced, err = ledgerEffects(ctx, src.LedgerURL, expected); err != nil {
		return r, err
	}
	if r.Notifications, err = notificationEffects(ctx, src.NotificationsURL, expected); err != nil {
		return r, err
	}
	if r.Outbox, err = readBacklog(ctx, src.OrdersURL); err != nil {
		return r, err
	}
	return r, nil
}

// addWire reads the topic, when src names one, into r.
func addWire(ctx context.Context, src Sources, r *Report) error {
	if src.Topic == "" || len(src.Brokers) == 0 {
		return nil
	}
	w, err := ReadWire(ctx, src.Brokers, src.Topic)
	if err != nil {
		return err
	}
	r.Wire = &w
	r.InboxAbsorbed = max(0, w.Duplicates-r.Ledger.Duplicate)
	return nil
}

// committed returns the effects the orders database says must happen: one
// capture per captured order, one per refund.
func committed(ctx context.Context, dbURL string) (map[key]bool, error) {
	rows, err := query(ctx, dbURL, `
		SELECT id::text, '' FROM orders WHERE status <> 'authorized'
		UNION ALL
		SELECT order_id::text, id::text FROM refunds`)
	if err != nil {
		return nil, fmt.Errorf("reading orders: %w", err)
	}
	out := make(map[key]bool, len(rows))
	for _, row := range rows {
		out[key{row[0], row[1]}] = true
	}
	return out, nil
}

// ledgerEffects compares journal entries with the committed effects, checks
// that no refund entry precedes its order's capture entry, and that postings
// balance per currency.
func ledgerEffects(ctx context.Context, dbURL string, expected map[key]bool) (Effects, map[string]int, error) {
	rows, err := query(ctx, dbURL, `
		SELECT order_id, COALESCE(refund_id, ''), kind, id::text FROM journal_entries ORDER BY journal_entries.id`)
	if err != nil {
		return Effects{}, nil, fmt.Errorf("reading the ledger: %w", err)
	}
	counts := map[key]int{}
	captured := map[string]bool{}
	outOfOrder := 0
	for _, row := range rows {
		k := key{row[0], row[1]}
		counts[k]++
		switch row[2] {
		case "capture":
			captured[row[0]] = true
		case "refund":
			if !captured[row[0]] {
				outOfOrder++
			}
		}
	}
	eff := compare(expected, counts)
	eff.OutOfOrder = outOfOrder

	sums, err := query(ctx, dbURL, `SELECT currency, sum(amount)::text FROM postings GROUP BY currency HAVING sum(amount) <> 0`)
	if err != nil {
		return eff, nil, fmt.Errorf("reading postings: %w", err)
	}
	unbalanced := map[string]int{}
	for _, s := range sums {
		var n int
		fmt.Sscan(s[1], &n)
		unbalanced[s[0]] = n
	}
	return eff, unbalanced, nil
}

// notificationEffects compares receipts with the committed effects. A receipt
// names its order and kind; refunds of one order are counted together.
func notificationEffects(ctx context.Context, dbURL string, expected map[key]bool) (Effects, error) {
	rows, err := query(ctx, dbURL, `SELECT order_id, kind, count(*)::text FROM notifications GROUP BY 1, 2`)
	if err != nil {
		return Effects{}, fmt.Errorf("reading notifications: %w", err)
	}
	type slot struct{ order, kind string }
	want := map[slot]int{}
	for k := range expected {
		if k.refund == "" {
			want[slot{k.order, "capture_receipt"}]++
		} else {
			want[slot{k.order, "refund_receipt"}]++
		}
	}
	var eff Effects
	eff.Expected = len(expected)
	got := map[slot]int{}
	for _, row := range rows {
		var n int
		fmt.Sscan(row[2], &n)
		got[slot{row[0], row[1]}] = n
	}
	for s, w := range want {
		g := got[s]
		eff.Applied += min(g, w)
		eff.Lost += max(0, w-g)
		eff.Duplicate += max(0, g-w)
	}
	for s, g := range got {
		if _, ok := want[s]; !ok {
			eff.Phantom += g
		}
	}
	return eff, nil
}

func compare(expected map[key]bool, counts map[key]int) Effects {
	eff := Effects{Expected: len(expected)}
	for k := range expected {
		switch n := counts[k]; {
		case n == 0:
			eff.Lost++
		default:
			eff.Applied++
			eff.Duplicate += n - 1
		}
	}
	for k, n := range counts {
		if !expected[k] {
			eff.Phantom += n
		}
	}
	return eff
}

// query runs a read-only query and returns its rows as strings.
func query(ctx context.Context, dbURL, sql string) ([][]string, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) ([]string, error) {
		vals, err := row.Values()
		if err != nil {
			return nil, err
		}
		out := make([]string, len(vals))
		for i, v := range vals {
			out[i] = fmt.Sprint(v)
		}
		return out, nil
	})
}
