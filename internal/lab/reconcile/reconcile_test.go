package reconcile_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/internal/lab/reconcile"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// fixture is one committed capture, applied once by the ledger and once by
// notifications: a clean state that the tests then damage by hand.
type fixture struct {
	orders, ledger, notifications *pgxpool.Pool
	src                           reconcile.Sources
	orderID                       string
}

func setup(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{}
	f.orders, f.src.OrdersURL = testenv.NewPool(t, "orders")
	f.ledger, f.src.LedgerURL = testenv.NewPool(t, "ledger")
	f.notifications, f.src.NotificationsURL = testenv.NewPool(t, "notifications")
	ctx := testenv.Context(t)
	f.orderID = uuid.Must(uuid.NewV7()).String()
	exec := func(pool *pgxpool.Pool, sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(f.orders, `INSERT INTO orders (id, customer_id, merchant_id, amount, currency, status, captured_amount, event_seq)
		VALUES ($1, 'cus_1', 'mer_1', 1999, 'EUR', 'captured', 1999, 1)`, f.orderID)
	exec(f.ledger, `INSERT INTO accounts (id, kind) VALUES ('customer:cus_1', 'customer_funds'), ('merchant:mer_1', 'merchant_payable')`)
	f.addJournalEntry(t)
	exec(f.notifications, `INSERT INTO notifications (event_id, order_id, kind, customer_id, recipient, message_id, subject)
		VALUES ($1, $2, 'capture_receipt', 'cus_1', 'cus_1@customers.paylab.local', '<x@paylab.local>', 'Receipt')`,
		uuid.New(), f.orderID)
	return f
}

// addJournalEntry posts the capture: customer −1999, merchant +1999.
func (f *fixture) addJournalEntry(t *testing.T) {
	t.Helper()
	ctx := testenv.Context(t)
	tx, err := f.ledger.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck
	var entry int64
	if err := tx.QueryRow(ctx, `INSERT INTO journal_entries (event_id, order_id, kind) VALUES ($1, $2, 'capture') RETURNING id`,
		uuid.New(), f.orderID).Scan(&entry); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO postings (entry_id, account_id, currency, amount)
		VALUES ($1, 'customer:cus_1', 'EUR', -1999), ($1, 'merchant:mer_1', 'EUR', 1999)`, entry); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestCleanStateHasNoViolations(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rep, err := reconcile.Settle(testenv.Context(t), f.src, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if v := rep.Violations(); len(v) > 0 || rep.Captures != 1 || rep.Ledger.Applied != 1 || rep.Notifications.Applied != 1 {
		t.Fatalf("report %+v, violations %v; want one capture applied once everywhere", rep, v)
	}
}

func TestDeletedJournalEntryIsLost(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := testenv.Context(t)
	if _, err := f.ledger.Exec(ctx, `DELETE FROM postings; DELETE FROM journal_entries`); err != nil {
		t.Fatal(err)
	}
	rep, err := reconcile.Settle(ctx, f.src, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ledger.Lost != 1 || len(rep.Violations()) == 0 {
		t.Fatalf("ledger %+v, violations %v; want 1 lost", rep.Ledger, rep.Violations())
	}
}

func TestDuplicatedJournalEntryIsADuplicateEffect(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.addJournalEntry(t)
	rep, err := reconcile.Settle(testenv.Context(t), f.src, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ledger.Duplicate != 1 || len(rep.Violations()) == 0 {
		t.Fatalf("ledger %+v, violations %v; want 1 duplicate", rep.Ledger, rep.Violations())
	}
}

func TestEffectWithoutCommittedOrderIsPhantom(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := testenv.Context(t)
	if _, err := f.orders.Exec(ctx, `DELETE FROM orders`); err != nil {
		t.Fatal(err)
	}
	rep, err := reconcile.Settle(ctx, f.src, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ledger.Phantom != 1 || rep.Notifications.Phantom != 1 {
		t.Fatalf("ledger %+v notifications %+v; want 1 phantom each", rep.Ledger, rep.Notifications)
	}
}

// addOutboxRow inserts an event of the fixture's order, seq in its
// sequence, into the outbox, pending, and returns its id.
func (f *fixture) addOutboxRow(t *testing.T, seq int) int64 {
	t.Helper()
	var id int64
	if err := f.orders.QueryRow(testenv.Context(t), `
		INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, sequence, topic, payload, occurred_at)
		VALUES ($1, 'order', $2, 'OrderCaptured', $3, 'order-events', '{}', now()) RETURNING id`,
		uuid.New(), f.orderID, seq).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestOutboxRowLeftPendingIsAViolation(t *testing.T) {
	t.Parallel()
	// The capture was published and applied everywhere, but its outbox row
	// was never recorded as dispatched.
	f := setup(t)
	ctx := testenv.Context(t)
	id := f.addOutboxRow(t, 1)
	rep, err := reconcile.Settle(ctx, f.src, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("1 outbox row left pending after the pipeline settled: ids %d, oldest inserted ", id)
	v := rep.Violations()
	if !rep.Settled || rep.Outbox.Pending != 1 || !slices.Equal(rep.Outbox.IDs, []int64{id}) || rep.Outbox.HighWater != id ||
		len(v) != 1 || !strings.HasPrefix(v[0], want) {
		t.Fatalf("outbox %+v, settled %t, violations %q; want the pending row %d named", rep.Outbox, rep.Settled, v, id)
	}

	// Recorded as dispatched, or parked, a row is no longer pending.
	if _, err := f.orders.Exec(ctx, `UPDATE outbox SET dispatched_at = now()`); err != nil {
		t.Fatal(err)
	}
	parked := f.addOutboxRow(t, 2)
	if _, err := f.orders.Exec(ctx, `UPDATE outbox SET parked_at = now() WHERE id = $1`, parked); err != nil {
		t.Fatal(err)
	}
	rep, err = reconcile.Settle(ctx, f.src, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outbox.Pending != 0 || rep.Outbox.HighWater != parked || len(rep.Violations()) != 0 {
		t.Fatalf("outbox %+v, violations %q; want nothing pending", rep.Outbox, rep.Violations())
	}
}

func TestSettleWaitsWhileAPendingRowIsHeld(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := testenv.Context(t)
	id := f.addOutboxRow(t, 1)
	// A relay holds the row for 2 seconds (a lease, or a retry backoff).
	if _, err := f.orders.Exec(ctx, `UPDATE outbox SET lease_owner = 'relay-1', leased_until = now() + interval '2 seconds', attempts = 1
		WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	rep, err := reconcile.Settle(ctx, f.src, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	var expired bool
	if err := f.orders.QueryRow(ctx, `SELECT leased_until <= now() FROM outbox WHERE id = $1`, id).Scan(&expired); err != nil {
		t.Fatal(err)
	}
	if !rep.Settled || rep.Outbox.Pending != 1 || rep.Outbox.Held != 0 || !expired {
		t.Fatalf("outbox %+v, settled %t, lease expired %t; want Settle to wait until the row was no longer held",
			rep.Outbox, rep.Settled, expired)
	}
}

func TestSettleWaitsWhileAWALSlotHasNoReader(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := testenv.Context(t)
	f.addOutboxRow(t, 1)
	// The WAL relays' reader lease expired: a standby is about to take the
	// slot over and publish the row.
	if _, err := f.orders.Exec(ctx, `INSERT INTO outbox_wal_readers (slot, owner, leased_until)
		VALUES ('paylab_outbox', 'relay-1', now() - interval '1 second')`); err != nil {
		t.Fatal(err)
	}
	rep, err := reconcile.Settle(ctx, f.src, 3*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Settled || rep.Outbox.Pending != 1 || !rep.Outbox.ReaderAwaited ||
		!strings.Contains(rep.OutboxLeftPending(), "when settling gave up (0 held by a relay or waiting out a retry backoff, the WAL slot without a reader)") {
		t.Fatalf("outbox %+v, settled %t: %q; want the row still awaited at the deadline", rep.Outbox, rep.Settled, rep.OutboxLeftPending())
	}
	// A reader holds the slot, and the row stays pending: it never will move.
	if _, err := f.orders.Exec(ctx, `UPDATE outbox_wal_readers SET leased_until = now() + interval '1 minute'`); err != nil {
		t.Fatal(err)
	}
	rep, err = reconcile.Settle(ctx, f.src, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Settled || rep.Outbox.Pending != 1 || rep.Outbox.ReaderAwaited {
		t.Fatalf("outbox %+v, settled %t; want the row left pending after the pipeline settled", rep.Outbox, rep.Settled)
	}
}
