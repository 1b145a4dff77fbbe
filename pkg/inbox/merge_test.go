package inbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/pkg/inbox"
	"github.com/paylab/paylab/pkg/inbox/internal/testenv"
)

// Under a stream spread over several partitions, each partition has few
// messages waiting at a time; their small batches are applied together, in
// one transaction, while every inbox rule holds: each aggregate's events in
// order, a redelivery a duplicate, a poison message dead-lettered without
// holding back the events merged with it.
//
// The stream comes in waves: the handler's first call of a wave waits until
// the whole wave is published, so the other partitions' claims have their
// messages waiting for the next transaction (a wave repeats only while no
// transaction has spanned partitions yet, as a slow fetch can leave them
// behind).
func TestSmallBatchesOfSeveralPartitionsShareATransaction(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.topic = testenv.NewTopic(t, 6)
	var (
		mu       sync.Mutex
		calls    int
		crossing int // calls whose events came from more than one partition
		applied  int
		hold     chan struct{} // the next call waits until it is closed
		held     = make(chan struct{}, 1)
	)
	cfg := f.config(func(c *inbox.Config) {
		c.BatchSize = 100
		c.Handlers["Poison"] = func(context.Context, pgx.Tx, inbox.Message) error { return inbox.Permanent(errBoom) }
		handlers := c.Handlers
		c.BatchHandler = func(ctx context.Context, tx pgx.Tx, msgs []inbox.Message) error {
			mu.Lock()
			h := hold
			hold = nil
			mu.Unlock()
			if h != nil {
				held <- struct{}{}
				<-h
			}
			partitions := map[int32]bool{}
			for _, msg := range msgs {
				partitions[msg.Partition] = true
				if err := handlers[msg.Type](ctx, tx, msg); err != nil {
					return err
				}
			}
			mu.Lock()
			calls++
			applied += len(msgs)
			if len(partitions) > 1 {
				crossing++
			}
			mu.Unlock()
			return nil
		}
	})
	r := f.start(cfg)
	testenv.Eventually(t, 60*time.Second, "the runner in its group", r.Ready)

	orders := 0
	var redeliver []*cloudEvent
	publishOrders := func(n int) {
		for range n {
			id := fmt.Sprintf("ord-m%d", orders)
			capture, refund := event(id, 1, "OrderCaptured"), event(id, 2, "OrderRefunded")
			f.publish(capture, refund)
			if orders%10 == 0 {
				redeliver = append(redeliver, capture)
			}
			orders++
		}
	}
	merged := func() bool { mu.Lock(); defer mu.Unlock(); return crossing > 0 }
	for wave := 0; wave < 10 && !merged(); wave++ {
		release := make(chan struct{})
		mu.Lock()
		hold = release
		mu.Unlock()
		publishOrders(1)
		select {
		case <-held:
		case <-time.After(60 * time.Second):
			t.Fatal("the wave's first event never reached the handler")
		}
		publishOrders(10)
		close(release)
		testenv.Eventually(t, 60*time.Second, "the wave applied", func() bool { return r.Counts().Processed == 2*orders })
	}
	// The rest of the stream with a poison message in it, then redeliveries.
	publishOrders(10)
	f.publish(event("ord-poison", 1, "Poison"))
	publishOrders(10)
	f.publish(redeliver...)

	testenv.Eventually(t, 60*time.Second, "every delivery settled", func() bool {
		c := r.Counts()
		return c.Processed+c.Duplicates+c.DeadLettered >= 2*orders+len(redeliver)+1
	})
	if got := f.count("SELECT count(*) FROM effects"); got != 2*orders {
		t.Errorf("%d effects, want %d: each event once", got, 2*orders)
	}
	if got := f.count(`SELECT count(*) FROM effects e JOIN effects l ON l.aggregate_id = e.aggregate_id
		AND l.sequence = 2 AND e.sequence = 1 AND l.id < e.id`); got != 0 {
		t.Errorf("%d refunds applied before their capture", got)
	}
	if got := f.count("SELECT count(*) FROM inbox WHERE status = 'failed'"); got != 1 {
		t.Errorf("%d events failed, want the poison alone", got)
	}
	c := r.Counts()
	if c.Processed != 2*orders || c.Duplicates != len(redeliver) || c.DeadLettered != 1 {
		t.Errorf("counts = %+v, want %d processed, %d duplicates, 1 dead-lettered", c, 2*orders, len(redeliver))
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d events applied in %d handler calls, %d of them across partitions", applied, calls, crossing)
	if crossing == 0 {
		t.Errorf("no transaction applied events of more than one partition (%d calls for %d events)", calls, applied)
	}
}
