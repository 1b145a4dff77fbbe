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
func TestSmallBatchesOfSeveralPartitionsShareATransaction(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.topic = testenv.NewTopic(t, 6)
	var (
		mu       sync.Mutex
		calls    int
		crossing int // calls whose events came from more than one partition
		applied  int
	)
	cfg := f.config(func(c *inbox.Config) {
		c.BatchSize = 100
		c.Handlers["Poison"] = func(context.Context, pgx.Tx, inbox.Message) error { return inbox.Permanent(errBoom) }
		handlers := c.Handlers
		c.BatchHandler = func(ctx context.Context, tx pgx.Tx, msgs []inbox.Message) error {
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
			time.Sleep(20 * time.Millisecond) // the others' messages gather meanwhile
			return nil
		}
	})
	r := f.start(cfg)
	testenv.Eventually(t, 60*time.Second, "the runner in its group", r.Ready)

	const orders = 40
	var redeliver []*cloudEvent
	for i := range orders {
		id := fmt.Sprintf("ord-m%d", i)
		capture, refund := event(id, 1, "OrderCaptured"), event(id, 2, "OrderRefunded")
		f.publish(capture, refund)
		if i%10 == 0 {
			redeliver = append(redeliver, capture)
		}
		if i == orders/2 {
			f.publish(event("ord-poison", 1, "Poison"))
		}
	}
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
