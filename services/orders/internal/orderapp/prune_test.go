package orderapp_test

import (
	"context"
	"testing"
	"time"

	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/services/orders/internal/orderapp"
)

func idem(key string) orderapp.Options {
	return orderapp.Options{Idempotency: &orderapp.Idempotency{
		Scope: "POST /v1/payments", Key: key, RequestHash: []byte(key),
		Encode: func(any) (orderapp.Response, error) { return orderapp.Response{Status: 201, Body: []byte("{}")}, nil },
	}}
}

// Keys older than the retention are pruned by the database clock; younger
// ones stay, and a pruned key can be used again.
func TestPruneIdempotencyKeys(t *testing.T) {
	t.Parallel()
	b := setup(t, orderapp.ModeOutbox, "order-events", nil, orderapp.Hooks{})
	ctx := testenv.Context(t)
	for _, k := range []string{"old-1", "old-2", "new-1"} {
		if _, err := b.app.PlacePayment(ctx, payment, idem(k)); err != nil {
			t.Fatal(err)
		}
	}
	// Age two keys past the retention, on the database clock.
	if _, err := b.pool.Exec(ctx, `UPDATE idempotency_keys SET created_at = now() - interval '24 hours 1 second'
		WHERE key LIKE 'old-%'`); err != nil {
		t.Fatal(err)
	}
	n, err := b.app.PruneIdempotencyKeys(ctx, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 || b.count("SELECT count(*) FROM idempotency_keys WHERE key = 'new-1'") != 1 {
		t.Fatalf("pruned %d, keys left: %d", n, b.count("SELECT count(*) FROM idempotency_keys"))
	}
	// The pruned key is free again: a new effect, not a replay.
	out, err := b.app.PlacePayment(ctx, payment, idem("old-1"))
	if err != nil || out.Replayed {
		t.Fatalf("reuse of a pruned key: replayed %v, %v", out.Replayed, err)
	}
	// The kept key still replays.
	out, err = b.app.PlacePayment(ctx, payment, idem("new-1"))
	if err != nil || !out.Replayed {
		t.Fatalf("kept key: replayed %v, %v", out.Replayed, err)
	}
}

// The pruner runs at start and then every interval, until its context ends.
func TestRunPrunerPrunesAndStops(t *testing.T) {
	t.Parallel()
	b := setup(t, orderapp.ModeOutbox, "order-events", nil, orderapp.Hooks{})
	ctx := testenv.Context(t)
	if _, err := b.app.PlacePayment(ctx, payment, idem("old")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(ctx, `UPDATE idempotency_keys SET created_at = now() - interval '25 hours'`); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.app.RunPruner(rctx, 50*time.Millisecond, 24*time.Hour) }()
	testenv.Eventually(t, time.Minute, "the pruner to delete the old key", func() bool {
		return b.count("SELECT count(*) FROM idempotency_keys") == 0
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
