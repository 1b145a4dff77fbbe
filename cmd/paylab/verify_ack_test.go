package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/paylab/paylab/internal/testkit/testenv"
)

// paylab verify --acknowledged reads the load generator's record of the
// orders the API answered 201 for, and fails when one of them is not in the
// orders database (a failover lost it), naming it; it passes when every one
// is there. Not parallel: it sets the environment.
func TestVerifyReportsAcknowledgedButLost(t *testing.T) {
	orders, ordersURL := testenv.NewPool(t, "orders")
	_, ledgerURL := testenv.NewPool(t, "ledger")
	_, notificationsURL := testenv.NewPool(t, "notifications")
	t.Setenv("ORDERS_DATABASE_URL", ordersURL)
	t.Setenv("LEDGER_DATABASE_URL", ledgerURL)
	t.Setenv("NOTIFICATIONS_DATABASE_URL", notificationsURL)
	ctx := testenv.Context(t)
	kept := uuid.Must(uuid.NewV7()).String()
	if _, err := orders.Exec(ctx, `INSERT INTO orders (id, customer_id, merchant_id, amount, currency, status)
		VALUES ($1, 'cus_1', 'mer_1', 500, 'GBP', 'authorized')`, kept); err != nil {
		t.Fatal(err)
	}
	lost := uuid.Must(uuid.NewV7()).String()

	verify := func(ids ...string) (string, error) {
		t.Helper()
		file := filepath.Join(t.TempDir(), "acknowledged")
		if err := os.WriteFile(file, []byte(strings.Join(ids, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		err := run(context.Background(), []string{"verify", "--topic=", "--timeout=20s", "--quiet=300ms", "--acknowledged=" + file}, &out)
		return out.String(), err
	}
	if out, err := verify(kept); err != nil || !strings.Contains(out, "1 orders in") || !strings.Contains(out, "0 of them not in the orders database") {
		t.Fatalf("every acknowledged order kept: %v\n%s", err, out)
	}
	out, err := verify(kept, lost)
	if !errors.Is(err, errViolations) || !strings.Contains(out, "1 acknowledged payments lost: "+lost) {
		t.Fatalf("one acknowledged order lost: err %v\n%s", err, out)
	}
}
