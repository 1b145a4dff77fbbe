package outbox_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

// An event that fails on its own is held aside: the stream goes on with
// every other order, the failing event's later events wait behind it (never
// published before it), and once the broker takes it they follow in order.
// Its attempts are counted in the table meanwhile.
func TestWALRelayHoldsAFailingEventAsideWhileTheStreamGoesOn(t *testing.T) {
	t.Parallel()
	f := walSetup(t, 1)
	ctx := longContext(t, 3*time.Minute)
	kafka := newKafkaPublisher(t, testenv.Brokers())
	var refusingOn atomic.Bool
	var refused atomic.Int64
	refusingOn.Store(true)
	first := event(f.topic, "order-held", 1)
	pub := refusing(kafka, &refusingOn, &first, &refused)
	rec := newRecorder()
	cfg := f.config(t, "wal-0", nil)
	cfg.MaxAttempts = -1
	cfg.RetryMaxBackoff = 200 * time.Millisecond
	startWALRelay(t, f, rec.wrap("wal-0", pub), cfg)

	enqueue(t, ctx, f.pool, first)
	behind := []outbox.Event{event(f.topic, "order-held", 2), event(f.topic, "order-held", 3)}
	for _, e := range behind {
		enqueue(t, ctx, f.pool, e)
	}
	others := seedBacklog(t, ctx, f.pool, f.topic, "other", 200, 20)
	testenv.Eventually(t, time.Minute, "every other order published while the event is held", func() bool {
		return dispatched(t, ctx, f.pool) == int64(len(others))
	})
	testenv.Eventually(t, time.Minute, "the held event's failed attempts counted in the table", func() bool {
		return queryInt(t, ctx, f.pool, "SELECT attempts FROM outbox WHERE event_id = $1 AND dispatched_at IS NULL", first.ID) >= 3
	})
	rec.mu.Lock()
	for _, e := range behind {
		if len(rec.sends[e.ID.String()]) > 0 {
			t.Errorf("event %d of the held order was published before the held one", e.Sequence)
		}
	}
	rec.mu.Unlock()

	refusingOn.Store(false)
	testenv.Eventually(t, time.Minute, "the held order published", func() bool {
		return dispatched(t, ctx, f.pool) == int64(len(others)+3)
	})
	// First deliveries (the injected refusals came after Kafka had taken
	// the event: copies on the wire, which the inbox skips).
	var seqs []int64
	seen := map[string]bool{}
	for _, msgs := range consumeAll(t, testenv.Brokers(), f.topic, len(others)+3, len(others)+3, time.Minute) {
		for _, m := range msgs {
			if m.key == "order-held" && !seen[m.id] {
				seen[m.id] = true
				seqs = append(seqs, m.sequence)
			}
		}
	}
	if fmt.Sprint(seqs) != "[1 2 3]" {
		t.Errorf("the held order arrived as %v, want [1 2 3]", seqs)
	}
}
