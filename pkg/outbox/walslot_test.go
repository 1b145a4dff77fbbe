package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

// A slot dropped under a running reader is created again by that reader,
// which hands over what was committed meanwhile before streaming the new
// slot; a slot dropped and created again behind the relay's back (not by
// the relay, so no hand-over is recorded) starts after the events committed
// in the gap, and the sweep publishes them, late. Either way nothing stays
// pending, and every event reaches the topic.
func TestWALRelayLosesNothingWhenTheSlotIsDropped(t *testing.T) {
	t.Parallel()
	for _, recreate := range []bool{false, true} {
		t.Run(fmt.Sprintf("recreated outside=%v", recreate), func(t *testing.T) {
			t.Parallel()
			f := walSetup(t, 3)
			ctx := longContext(t, 3*time.Minute)
			reg := prometheus.NewRegistry()
			cfg := f.config(t, "wal-0", reg)
			cfg.StatsInterval = 200 * time.Millisecond
			// While refused is set, every publish fails: the events streamed
			// meanwhile stay pending and unconfirmed when the slot goes.
			var refused atomic.Bool
			kafka := newKafkaPublisher(t, testenv.Brokers())
			startWALRelay(t, f, outbox.PublisherFunc(func(ctx context.Context, events []outbox.Event) []error {
				if refused.Load() {
					errs := make([]error, len(events))
					for i := range errs {
						errs[i] = errors.New("refused")
					}
					return errs
				}
				return kafka.Publish(ctx, events)
			}), cfg)

			// Orders of five events each, committed one by one throughout.
			var n atomic.Int64
			ids := map[string]bool{}
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					for seq := int64(1); seq <= 5; seq++ {
						e := event(f.topic, fmt.Sprintf("order-%04d", i), seq)
						if err := pgxBegin(ctx, f, e); err != nil {
							return
						}
						ids[e.ID.String()] = true
						n.Add(1)
					}
				}
			}()
			testenv.Eventually(t, time.Minute, "events flowing", func() bool { return dispatched(t, ctx, f.pool) > 50 })
			refused.Store(true)
			testenv.Eventually(t, time.Minute, "events streamed and not published", func() bool {
				return queryInt(t, ctx, f.pool, "SELECT count(*) FROM outbox WHERE dispatched_at IS NULL") > 50
			})
			dropSlotOnly(t, f)
			if recreate {
				if _, err := f.admin.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", f.cfg.Slot); err != nil {
					t.Fatal(err)
				}
			}
			refused.Store(false)
			at := n.Load()
			testenv.Eventually(t, time.Minute, "events committed after the drop", func() bool { return n.Load() > at+100 })
			close(stop)
			<-done
			total := n.Load()
			testenv.Eventually(t, 2*time.Minute, "every event recorded", func() bool { return dispatched(t, ctx, f.pool) >= total })
			if p := queryInt(t, ctx, f.pool, "SELECT count(*) FROM outbox WHERE dispatched_at IS NULL"); p != 0 {
				t.Errorf("%d events pending", p)
			}
			// Behind the relay's back, the gap's events reach the topic after
			// later events of their orders: lost to the stream, they are
			// found only once the stream passed them. Nothing is lost, but
			// their orders' sequence is not kept.
			perOrder := int64(5)
			if recreate {
				perOrder = 0
			}
			checkTopic(t, consumeAll(t, testenv.Brokers(), f.topic, len(ids), len(ids), time.Minute), ids, perOrder)
			// Recreated by the reader, the hand-over publishes the gap; behind
			// its back, only the sweep can.
			if swept := metricValue(t, reg, "outbox_wal_swept_total"); recreate != (swept > 0) {
				t.Errorf("wal_swept_total = %v with the slot recreated outside the relay: %v", swept, recreate)
			}
		})
	}
}

func pgxBegin(ctx context.Context, f *walFixture, e outbox.Event) error {
	tx, err := f.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck
	if err := outbox.Enqueue(ctx, tx, e); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// dropSlotOnly drops the fixture's slot (not its publication), ending the
// walsender attached to it.
func dropSlotOnly(t *testing.T, f *walFixture) {
	t.Helper()
	ctx := testenv.Context(t)
	testenv.Eventually(t, 30*time.Second, "the slot dropped", func() bool {
		_, _ = f.admin.Exec(ctx, "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active", f.cfg.Slot)
		_, err := f.admin.Exec(ctx, "SELECT pg_drop_replication_slot($1)", f.cfg.Slot)
		return err == nil
	})
}
