package inbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/pkg/inbox"
	"github.com/paylab/paylab/pkg/inbox/internal/testenv"
)

// Batches keep every rule of the inbox, with per-message handlers and with a
// BatchHandler: messages already waiting are taken together (here one
// batch, published before the runner starts), and inside it a redelivered
// id, a copy of an id further on, a position re-issued under a new id, a
// refund ahead of its capture and a gap that fills later in the same batch
// all come out as they do one message at a time. A rejected message fails
// its batch, which is rolled back and delivered message by message: the
// poison is dead-lettered, every other event applied once.
func TestBatchesKeepTheInboxRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		batch bool
	}{
		{name: "per-message handlers"},
		{name: "batch handler", batch: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			var mu sync.Mutex
			largest := 0
			cfg := f.config(func(c *inbox.Config) {
				c.BatchSize = 100
				c.Handlers["Poison"] = func(context.Context, pgx.Tx, inbox.Message) error { return inbox.Permanent(errBoom) }
				handlers := c.Handlers
				if tc.batch {
					c.BatchHandler = func(ctx context.Context, tx pgx.Tx, msgs []inbox.Message) error {
						mu.Lock()
						largest = max(largest, len(msgs))
						mu.Unlock()
						for _, msg := range msgs {
							if err := handlers[msg.Type](ctx, tx, msg); err != nil {
								return err
							}
						}
						return nil
					}
				}
			})
			a1, a2 := event("ord-a", 1, "OrderCaptured"), event("ord-a", 2, "OrderRefunded")
			b1, b1again := event("ord-b", 1, "OrderCaptured"), event("ord-b", 1, "OrderCaptured") // a new id for position 1
			c1, c2, c3 := event("ord-c", 1, "OrderCaptured"), event("ord-c", 2, "OrderRefunded"), event("ord-c", 3, "OrderRefunded")
			poison := event("ord-p", 1, "Poison")
			f.publish(a2, b1, a1, b1, c1, c3, b1again, c2, poison, b1)

			r := f.start(cfg)
			testenv.Eventually(t, 60*time.Second, "ten deliveries settled", func() bool {
				c := r.Counts() // the two parked events are counted again once applied
				return c.Processed+c.Duplicates+c.DeadLettered >= 10
			})
			for _, want := range []struct {
				aggregate string
				seqs      []int64
			}{{"ord-a", []int64{1, 2}}, {"ord-b", []int64{1}}, {"ord-c", []int64{1, 2, 3}}, {"ord-p", nil}} {
				rows, err := f.pool.Query(context.Background(), "SELECT sequence FROM effects WHERE aggregate_id = $1 ORDER BY id", want.aggregate)
				if err != nil {
					t.Fatal(err)
				}
				seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
				if err != nil {
					t.Fatal(err)
				}
				if len(seqs) != len(want.seqs) || (len(seqs) > 0 && seqs[len(seqs)-1] != want.seqs[len(want.seqs)-1]) ||
					!sorted(seqs) {
					t.Errorf("%s: applied %v, want %v", want.aggregate, seqs, want.seqs)
				}
			}
			if got := f.count("SELECT count(*) FROM effects WHERE event_id = $1", b1.ID); got != 1 {
				t.Errorf("ord-b's capture applied %d times, want once", got)
			}
			if got := f.count("SELECT count(*) FROM inbox WHERE event_id = $1 AND status = 'failed'", poison.ID); got != 1 {
				t.Error("the poison is not recorded as failed")
			}
			if got := f.count("SELECT count(*) FROM inbox WHERE status = 'received'"); got != 0 {
				t.Errorf("%d events still parked", got)
			}
			c := r.Counts()
			// Processed: a1 a2 b1 c1 c2 c3 (a2 and c3 after waiting); duplicates:
			// b1 twice more and b1again.
			if c.Processed != 6 || c.Duplicates != 3 || c.DeadLettered != 1 {
				t.Errorf("counts = %+v, want 6 processed, 3 duplicates, 1 dead-lettered", c)
			}
			if tc.batch && largest < 2 {
				t.Errorf("the batch handler saw at most %d events at once: no batch was applied", largest)
			}
		})
	}
}

func sorted(s []int64) bool {
	for i := 1; i < len(s); i++ {
		if s[i] <= s[i-1] {
			return false
		}
	}
	return true
}
