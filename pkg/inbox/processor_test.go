package inbox_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/pkg/inbox"
	"github.com/paylab/paylab/pkg/inbox/internal/testenv"
)

// webhookQueue is a source that is not Kafka: an at-least-once queue (an
// HTTP webhook, a cloud queue) that hands out what was pushed, in any
// order, and hands it out again until it is acknowledged.
type webhookQueue struct {
	mu      sync.Mutex
	pending []inbox.Message
}

func (q *webhookQueue) push(msgs ...inbox.Message) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending = append(q.pending, msgs...)
}

// next hands out a pending message without removing it.
func (q *webhookQueue) next(i int) (inbox.Message, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pending) == 0 {
		return inbox.Message{}, false
	}
	return q.pending[i%len(q.pending)], true
}

func (q *webhookQueue) ack(id uuid.UUID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending = slices.DeleteFunc(q.pending, func(m inbox.Message) bool { return m.ID == id })
}

// A Processor fed by a non-Kafka, at-least-once source that redelivers
// and reorders: every event takes effect exactly once, each aggregate's
// in sequence order; a message the handler rejects goes to the dead-letter
// function, and one without an ID is dead-lettered as undecodable. With
// the inbox off, the same deliveries take effect more than once.
func TestProcessorWithoutKafka(t *testing.T) {
	t.Parallel()
	for _, disabled := range []bool{false, true} {
		t.Run(map[bool]string{false: "inbox", true: "inbox disabled"}[disabled], func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			ctx := testenv.Context(t)
			var (
				mu   sync.Mutex
				dead []string
			)
			cfg := f.config(func(c *inbox.Config) {
				c.Brokers, c.Topic, c.Group = nil, "", "" // not used
				c.Unsafe.Disabled = disabled
				c.Handlers["Bad"] = func(context.Context, pgx.Tx, inbox.Message) error {
					return inbox.Permanent(errors.New("cannot apply"))
				}
			})
			p, err := inbox.NewProcessor(f.pool, cfg, func(_ context.Context, msg inbox.Message, reason string, _ error) error {
				mu.Lock()
				defer mu.Unlock()
				dead = append(dead, reason+" "+msg.Type)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}

			q := &webhookQueue{}
			msg := func(order string, seq int64, typ string) inbox.Message {
				return inbox.Message{ID: uuid.Must(uuid.NewV7()), Type: typ, Subject: order, Sequence: seq}
			}
			// Pushed latest first, so the queue hands out each aggregate's
			// events out of order.
			q.push(msg("order-1", 3, "OrderRefunded"), msg("order-1", 2, "OrderRefunded"), msg("order-1", 1, "OrderCaptured"),
				msg("order-2", 1, "OrderCaptured"), msg("order-3", 0, "Bad"), inbox.Message{Type: "OrderCaptured", Subject: "order-4"})

			deliveries := 0
			for i := 0; ; i++ {
				m, ok := q.next(i * 7)
				if !ok {
					break
				}
				if _, err := p.Process(ctx, m); err != nil {
					t.Fatal(err)
				}
				deliveries++
				// The source redelivers: the first two deliveries of each
				// message are lost acknowledgements.
				if i >= 12 {
					q.ack(m.ID)
				}
			}

			var (
				applied int
				order1  []int64
			)
			if err := f.pool.QueryRow(ctx, `SELECT count(*), COALESCE(array_agg(sequence ORDER BY id) FILTER (WHERE aggregate_id = 'order-1'), '{}')
				FROM effects`).Scan(&applied, &order1); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if disabled {
				if applied <= 4 {
					t.Fatalf("with the inbox off, %d deliveries took effect %d times, want more than 4", deliveries, applied)
				}
				return
			}
			if applied != 4 || !slices.Equal(order1, []int64{1, 2, 3}) {
				t.Errorf("%d deliveries took effect %d times (order-1's sequences %v), want each of the 4 good events once, in order", deliveries, applied, order1)
			}
			slices.Sort(dead)
			dead = slices.Compact(dead) // the message without an ID cannot be told from its redeliveries
			if want := []string{"rejected Bad", "undecodable OrderCaptured"}; !slices.Equal(dead, want) {
				t.Errorf("dead-lettered %v, want %v", dead, want)
			}
			if c := p.Counts(); c.Duplicates == 0 {
				t.Errorf("counts %+v: no duplicate counted", c)
			}
			if err := p.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
