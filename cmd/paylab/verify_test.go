package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/paylab/paylab/internal/testkit/testenv"
)

// paylab verify exits non-zero when a journal entry is deleted or duplicated
// by hand, and zero on the untouched state. Not parallel: it sets the
// environment.
func TestVerifyExitsNonZeroOnTamperedLedger(t *testing.T) {
	orders, ordersURL := testenv.NewPool(t, "orders")
	ledger, ledgerURL := testenv.NewPool(t, "ledger")
	notifications, notificationsURL := testenv.NewPool(t, "notifications")
	t.Setenv("ORDERS_DATABASE_URL", ordersURL)
	t.Setenv("LEDGER_DATABASE_URL", ledgerURL)
	t.Setenv("NOTIFICATIONS_DATABASE_URL", notificationsURL)
	ctx := testenv.Context(t)
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	order := uuid.Must(uuid.NewV7()).String()
	must(orders.Exec(ctx, `INSERT INTO orders (id, customer_id, merchant_id, amount, currency, status, captured_amount, event_seq)
		VALUES ($1, 'cus_1', 'mer_1', 500, 'GBP', 'captured', 500, 1)`, order))
	must(ledger.Exec(ctx, `INSERT INTO accounts (id, kind) VALUES ('customer:cus_1', 'customer_funds'), ('merchant:mer_1', 'merchant_payable')`))
	post := func() {
		t.Helper()
		must(ledger.Exec(ctx, `WITH e AS (INSERT INTO journal_entries (event_id, order_id, kind) VALUES (gen_random_uuid(), $1, 'capture') RETURNING id)
			INSERT INTO postings (entry_id, account_id, currency, amount)
			SELECT id, 'customer:cus_1', 'GBP', -500 FROM e UNION ALL SELECT id, 'merchant:mer_1', 'GBP', 500 FROM e`, order))
	}
	post()
	must(notifications.Exec(ctx, `INSERT INTO notifications (event_id, order_id, kind, customer_id, recipient, message_id, subject)
		VALUES (gen_random_uuid(), $1, 'capture_receipt', 'cus_1', 'r@x', '<m@x>', 's')`, order))

	verify := func() (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), []string{"verify", "--topic=", "--timeout=20s", "--quiet=300ms"}, &out)
		return out.String(), err
	}
	if out, err := verify(); err != nil {
		t.Fatalf("untouched state: %v\n%s", err, out)
	}

	post() // a duplicated journal entry
	if out, err := verify(); !errors.Is(err, errViolations) || !strings.Contains(out, "1 duplicate effects") {
		t.Fatalf("duplicated entry: err %v\n%s", err, out)
	}

	must(ledger.Exec(ctx, `DELETE FROM postings; DELETE FROM journal_entries`)) // every entry deleted
	if out, err := verify(); !errors.Is(err, errViolations) || !strings.Contains(out, "1 lost") {
		t.Fatalf("deleted entry: err %v\n%s", err, out)
	}
}
