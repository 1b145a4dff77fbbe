package outbox_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

// An event the stream passes without carrying it (here: committed while
// the outbox table was out of the publication; a slot recreated without a
// hand-over has the same effect) is found by the sweep once the reader has
// confirmed a position past its commit, and published: the table stays the
// source of truth.
func TestWALRelaySweepPublishesEventsTheStreamPassed(t *testing.T) {
	t.Parallel()
	f := walSetup(t, 1)
	ctx := testenv.Context(t)
	reg := prometheus.NewRegistry()
	cfg := f.config(t, "wal-0", reg)
	cfg.StatsInterval = 200 * time.Millisecond
	startWALRelay(t, f, newKafkaPublisher(t, testenv.Brokers()), cfg)

	first := event(f.topic, "order-1", 1)
	enqueue(t, ctx, f.pool, first)
	testenv.Eventually(t, time.Minute, "the first event published", func() bool { return dispatched(t, ctx, f.pool) == 1 })

	pub := "outbox_wal" // the default publication (Config.Publication)
	if _, err := f.admin.Exec(ctx, "ALTER PUBLICATION "+pub+" DROP TABLE outbox"); err != nil {
		t.Fatal(err)
	}
	passed := event(f.topic, "order-2", 1)
	enqueue(t, ctx, f.pool, passed)
	if _, err := f.admin.Exec(ctx, "ALTER PUBLICATION "+pub+" ADD TABLE outbox"); err != nil {
		t.Fatal(err)
	}
	last := event(f.topic, "order-3", 1)
	enqueue(t, ctx, f.pool, last)

	testenv.Eventually(t, time.Minute, "every event published", func() bool { return dispatched(t, ctx, f.pool) == 3 })
	ids := map[string]bool{first.ID.String(): true, passed.ID.String(): true, last.ID.String(): true}
	checkTopic(t, consumeAll(t, testenv.Brokers(), f.topic, len(ids), len(ids), time.Minute), ids, 0)
	if got := metricValue(t, reg, "outbox_wal_swept_total"); got != 1 {
		t.Errorf("wal_swept_total = %v, want 1", got)
	}
}
