package reconcile_test

import (
	"context"
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
