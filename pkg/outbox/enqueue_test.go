package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

func captured(orderID string, seq int64) outbox.Event {
	return outbox.Event{
		AggregateType: "order",
		AggregateID:   orderID,
		Type:          "OrderCaptured",
		Sequence:      seq,
		Topic:         "order-events",
		Payload:       json.RawMessage(`{"order_id":"` + orderID + `","amount":1999,"currency":"EUR"}`),
		Headers:       map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}
}

func countPending(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(testenv.Context(t), "SELECT count(*) FROM outbox WHERE dispatched_at IS NULL").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestEnqueueCommitsWithTheTransaction(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.NewPool(t, migrate)
	ctx := testenv.Context(t)

	events := []outbox.Event{captured("o-1", 1), captured("o-2", 1)}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return outbox.Enqueue(ctx, tx, events...) })
	if err != nil {
		t.Fatal(err)
	}
	if got := countPending(t, pool); got != 2 {
		t.Fatalf("pending rows after commit = %d, want 2", got)
	}
	var (
		eventID     string
		headers     map[string]string
		payload     map[string]any
		schema, seq int64
	)
	err = pool.QueryRow(ctx, `SELECT event_id::text, headers, payload, schema_version, sequence
		FROM outbox WHERE aggregate_id = 'o-1'`).Scan(&eventID, &headers, &payload, &schema, &seq)
	if err != nil {
		t.Fatal(err)
	}
	if eventID != events[0].ID.String() || events[0].ID.Version() != 7 {
		t.Errorf("event id = %s, want the UUIDv7 %s set on the caller's event", eventID, events[0].ID)
	}
	if headers["traceparent"] == "" || payload["amount"] != float64(1999) || schema != 1 || seq != 1 {
		t.Errorf("stored row: headers %v payload %v schema %d seq %d", headers, payload, schema, seq)
	}
}

func TestEnqueueRollsBackWithTheTransaction(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.NewPool(t, migrate)
	ctx := testenv.Context(t)

	boom := errors.New("business change failed")
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := outbox.Enqueue(ctx, tx, captured("o-1", 1)); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
	if got := countPending(t, pool); got != 0 {
		t.Fatalf("pending rows after rollback = %d, want 0", got)
	}
}

func TestEnqueueNotifiesOnCommitOnly(t *testing.T) {
	t.Parallel()
	pool, dbURL := testenv.NewPool(t, migrate)
	ctx := testenv.Context(t)

	listener, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(context.Background())
	if _, err := listener.Exec(ctx, "LISTEN "+"outbox"); err != nil {
		t.Fatal(err)
	}
	waitNotification := func(d time.Duration) bool {
		wctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		_, err := listener.WaitForNotification(wctx)
		return err == nil
	}

	// A rolled-back transaction wakes nobody.
	_ = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_ = outbox.Enqueue(ctx, tx, captured("o-1", 1))
		return errors.New("rollback")
	})
	if waitNotification(300 * time.Millisecond) {
		t.Fatal("notified for a rolled-back transaction")
	}
	// A committed one with three events wakes the relays once.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return outbox.Enqueue(ctx, tx, captured("o-1", 1), captured("o-1", 2), captured("o-2", 1))
	})
	if err != nil {
		t.Fatal(err)
	}
	if !waitNotification(5 * time.Second) {
		t.Fatal("no notification after commit")
	}
	if waitNotification(300 * time.Millisecond) {
		t.Fatal("more than one notification for one transaction")
	}
}

func TestEnqueueRejectsInvalidEvents(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.NewPool(t, migrate)
	ctx := testenv.Context(t)

	tests := []struct {
		name   string
		mutate func(*outbox.Event)
	}{
		{"no aggregate type", func(e *outbox.Event) { e.AggregateType = "" }},
		{"no aggregate id", func(e *outbox.Event) { e.AggregateID = "" }},
		{"no type", func(e *outbox.Event) { e.Type = "" }},
		{"no topic", func(e *outbox.Event) { e.Topic = "" }},
		{"negative sequence", func(e *outbox.Event) { e.Sequence = -1 }},
		{"payload not JSON", func(e *outbox.Event) { e.Payload = json.RawMessage("{") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := captured("o-1", 1)
			tt.mutate(&e)
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return outbox.Enqueue(ctx, tx, e) })
			if !errors.Is(err, outbox.ErrInvalidEvent) {
				t.Fatalf("err = %v, want ErrInvalidEvent", err)
			}
		})
	}
	if got := countPending(t, pool); got != 0 {
		t.Fatalf("pending rows = %d, want 0", got)
	}
}
