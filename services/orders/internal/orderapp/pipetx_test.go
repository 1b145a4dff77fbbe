package orderapp_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/services/orders/internal/orderapp"
)

// A payment with an Idempotency-Key costs three round trips to the database
// (BEGIN with the key's lock and lookup, the captured order, and the key,
// the outbox row and COMMIT together), and makes the same writes as
// ever: the order, its key, its one outbox row.
func TestPlacePaymentRoundTrips(t *testing.T) {
	t.Parallel()
	dbURL := testenv.NewDatabase(t, "orders")
	pool, stmts := testenv.CountingPool(t, dbURL)
	app, err := orderapp.New(orderapp.Config{Pool: pool, Topic: "order-events", Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	// The first payment on a connection also prepares its statements.
	if _, err := app.PlacePayment(ctx, payment, idem("warm-up")); err != nil {
		t.Fatal(err)
	}
	trips, before := stmts.RoundTrips(), stmts.Counts()
	if _, err := app.PlacePayment(ctx, payment, idem("counted")); err != nil {
		t.Fatal(err)
	}
	after := stmts.Counts()
	if got := stmts.RoundTrips() - trips; got != 3 {
		t.Errorf("round trips: %d, want 3", got)
	}
	for name, want := range map[string]int{
		"TryLockIdempotencyKey": 1, "GetIdempotencyKey": 1, "PlaceCapturedOrder": 1,
		"InsertIdempotencyKey": 1, "InsertEvent": 1, "CreateOrder": 0, "CaptureOrder": 0,
	} {
		if got := after[name] - before[name]; got != want {
			t.Errorf("%s ran %d times, want %d", name, got, want)
		}
	}
	var orders, keys, events int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders WHERE status = 'captured' AND captured_amount = amount AND event_seq = 1),
		(SELECT count(*) FROM idempotency_keys), (SELECT count(*) FROM outbox WHERE sequence = 1)`).Scan(&orders, &keys, &events); err != nil {
		t.Fatal(err)
	}
	if orders != 2 || keys != 2 || events != 2 {
		t.Fatalf("captured orders %d, keys %d, events %d; want 2 each", orders, keys, events)
	}
}

// A write held for the commit that fails there (here the outbox row, refused
// by a trigger) fails the request and takes the whole transaction with it:
// no order, no key. The connection goes back clean and the next payment
// commits.
func TestPlacePaymentHeldWriteFailureCommitsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, orderapp.ModeOutbox, "order-events", nil, orderapp.Hooks{})
	ctx := testenv.Context(t)
	if _, err := b.pool.Exec(ctx, `
		CREATE FUNCTION refuse_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'outbox refused'; END $$;
		CREATE TRIGGER refuse_outbox BEFORE INSERT ON outbox FOR EACH ROW EXECUTE FUNCTION refuse_outbox();`); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := b.app.PlacePayment(ctx, payment, idem("refused")); err == nil {
			t.Fatalf("payment %d: committed with its outbox row refused", i)
		}
	}
	if n := b.count("SELECT (SELECT count(*) FROM orders) + (SELECT count(*) FROM idempotency_keys) + (SELECT count(*) FROM outbox)"); n != 0 {
		t.Fatalf("%d rows committed by failed payments", n)
	}
	if _, err := b.pool.Exec(ctx, "DROP TRIGGER refuse_outbox ON outbox"); err != nil {
		t.Fatal(err)
	}
	out, err := b.app.PlacePayment(ctx, payment, idem("refused"))
	if err != nil || out.Replayed {
		t.Fatalf("after the trigger is gone: replayed %v, %v", out.Replayed, err)
	}
	if n := b.count("SELECT count(*) FROM outbox"); n != 1 {
		t.Fatalf("%d outbox rows, want 1", n)
	}
}
