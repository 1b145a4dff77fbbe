package inbox

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/pkg/inbox/internal/testenv"
)

// A run of deliveries costs the inbox the same statements whatever its
// length: recording, locking the sequences, advancing them and looking for
// parked events — four, for 1, 10 or 300 events (here of 150 aggregates, two
// events each, so sequences are both created and advanced twice in a run).
// The handlers' statements come on top (none here).
func TestStepCostsAFixedNumberOfStatements(t *testing.T) {
	t.Parallel()
	_, dbURL := testenv.NewPool(t, migrate)
	pool, counter := testenv.CountingPool(t, dbURL)
	ctx := testenv.Context(t)
	noop := func(context.Context, pgx.Tx, Message) error { return nil }
	icfg := Config{Handlers: map[string]Handler{"OrderCaptured": noop, "OrderRefunded": noop},
		BatchHandler: func(context.Context, pgx.Tx, []Message) error { return nil }}
	icfg = icfg.withDefaults()
	m, err := newMetrics(prometheus.NewRegistry(), DefaultTable, handlerTypes(icfg.Handlers))
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(pool, icfg, m)

	for _, n := range []int{1, 10, 300} {
		var msgs []Message
		for i := range n {
			typ, seq := "OrderCaptured", int64(1)
			if i%2 == 1 {
				typ, seq = "OrderRefunded", 2
			}
			msgs = append(msgs, Message{ID: uuid.Must(uuid.NewV7()), Type: typ, Subject: fmt.Sprintf("ord-%d-%d", n, i/2),
				Sequence: seq, Data: []byte(`{}`), Time: time.Now(), Topic: "t", Offset: int64(i)})
		}
		var outcomes []Outcome
		err := withTx(ctx, pool, func(tx pgx.Tx) (err error) {
			before := counter.Total()
			outcomes, _, err = e.step(ctx, tx, msgs)
			if got := counter.Total() - before; err == nil && got != 4 {
				t.Errorf("%d events: %d statements, want 4", n, got)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range outcomes {
			if o != Processed {
				t.Fatalf("%d events: event %d is %s, want processed", n, i, o)
			}
		}
	}
}

// migrate gives a test database the inbox tables, with Migrate and the
// default table name.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return Migrate(ctx, pool, Config{})
}
