package inbox_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/pkg/inbox"
	"github.com/paylab/paylab/pkg/inbox/internal/testenv"
)

func TestDuplicateDeliveriesHaveOneEffect(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		disabled    bool
		wantEffects int
		wantDups    int
	}{
		{name: "inbox on", wantEffects: 1, wantDups: 4},
		{name: "inbox off", disabled: true, wantEffects: 5, wantDups: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			r := f.start(f.config(func(c *inbox.Config) { c.Unsafe.Disabled = tc.disabled }))
			e := event("ord-1", 1, "OrderCaptured")
			for range 5 {
				f.publish(e)
			}
			testenv.Eventually(t, 60*time.Second, "five deliveries", func() bool {
				c := r.Counts()
				return c.Processed+c.Duplicates == 5
			})
			if got := f.count("SELECT count(*) FROM effects WHERE event_id = $1", e.ID); got != tc.wantEffects {
				t.Errorf("effects = %d, want %d", got, tc.wantEffects)
			}
			if got := r.Counts().Duplicates; got != tc.wantDups {
				t.Errorf("duplicates counted = %d, want %d", got, tc.wantDups)
			}
		})
	}
}

func TestRefundBeforeCaptureIsHeldUntilTheGapFills(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := f.start(f.config())
	capture, refund1, refund2 := event("ord-2", 1, "OrderCaptured"), event("ord-2", 2, "OrderRefunded"), event("ord-2", 3, "OrderRefunded")
	f.publish(refund2, refund1)
	testenv.Eventually(t, 60*time.Second, "two parked refunds", func() bool { return r.Counts().Parked == 2 })
	if got := f.count("SELECT count(*) FROM effects"); got != 0 {
		t.Fatalf("%d effects applied before the capture", got)
	}
	f.publish(capture)
	testenv.Eventually(t, 30*time.Second, "three effects", func() bool { return f.count("SELECT count(*) FROM effects") == 3 })
	rows, err := f.pool.Query(context.Background(), "SELECT sequence FROM effects ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 3 || seqs[0] != 1 || seqs[1] != 2 || seqs[2] != 3 {
		t.Errorf("applied in order %v, want [1 2 3]", seqs)
	}
}

func TestPoisonMessagesAreDeadLetteredAndThePartitionMoves(t *testing.T) {
	t.Parallel()
	f := setup(t)
	failing := func(context.Context, pgx.Tx, inbox.Message) error { return errBoom }
	r := f.start(f.config(func(c *inbox.Config) {
		c.Handlers["Failing"] = failing
		c.MaxAttempts = 3
	}))

	f.publishRaw(&sarama.ProducerMessage{Key: sarama.StringEncoder("ord-3"), Value: sarama.StringEncoder("not json")})
	unknown := event("ord-4", 1, "OrderShipped")
	fails := event("ord-5", 1, "Failing")
	good := event("ord-6", 1, "OrderCaptured")
	f.publish(unknown, fails, good)

	testenv.Eventually(t, 60*time.Second, "the good message after the poison", func() bool {
		return f.count("SELECT count(*) FROM effects WHERE event_id = $1", good.ID) == 1
	})
	dead := f.readDLQ(3)
	wantReasons := []string{inbox.ReasonUndecodable, inbox.ReasonUnknownType, inbox.ReasonHandlerFailed}
	for i, m := range dead {
		if got := header(m, inbox.HeaderDLQReason); got != wantReasons[i] {
			t.Errorf("dead letter %d: reason %q, want %q", i, got, wantReasons[i])
		}
		if header(m, inbox.HeaderDLQOriginalTopic) != f.topic || header(m, inbox.HeaderDLQOriginalOffset) == "" {
			t.Errorf("dead letter %d lacks its origin: %v", i, m.Headers)
		}
	}
	if got := header(dead[2], inbox.HeaderDLQError); got == "" {
		t.Error("the handler's error is not in the dead letter")
	}
	for _, id := range []any{unknown.ID, fails.ID} {
		if got := f.count("SELECT count(*) FROM inbox WHERE event_id = $1 AND status = 'failed'", id); got != 1 {
			t.Errorf("event %v: inbox status is not failed", id)
		}
	}
	if got := f.count("SELECT attempts FROM inbox WHERE event_id = $1", fails.ID); got != 3 {
		t.Errorf("attempts = %d, want 3", got)
	}
	c := r.Counts()
	if c.DeadLettered != 3 || c.Failed != 5 { // 1 undecodable + 1 unknown type + 3 handler attempts
		t.Errorf("counts = %+v, want 3 dead-lettered and 5 failed", c)
	}

	// A redelivery of a dead-lettered event is a duplicate, not a second dead letter.
	f.publish(fails)
	testenv.Eventually(t, 30*time.Second, "the duplicate", func() bool { return r.Counts().Duplicates == 1 })
}

func TestRedriveAppliesAFailedEventAndWhatWaitedBehindIt(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var broken atomic.Bool
	broken.Store(true)
	flaky := func(ctx context.Context, tx pgx.Tx, msg inbox.Message) error {
		if broken.Load() {
			return inbox.Permanent(errBoom)
		}
		return recordEffect(ctx, tx, msg)
	}
	cfg := f.config(func(c *inbox.Config) { c.Handlers["OrderCaptured"] = flaky })
	r := f.start(cfg)
	capture, refund := event("ord-7", 1, "OrderCaptured"), event("ord-7", 2, "OrderRefunded")
	f.publish(capture, refund)
	testenv.Eventually(t, 60*time.Second, "capture dead-lettered, refund parked", func() bool {
		c := r.Counts()
		return c.DeadLettered == 1 && c.Parked == 1
	})
	if got := f.readDLQ(1); header(got[0], inbox.HeaderDLQReason) != inbox.ReasonRejected {
		t.Errorf("reason %q, want %q", header(got[0], inbox.HeaderDLQReason), inbox.ReasonRejected)
	}

	ctx := context.Background()
	if _, err := inbox.Redrive(ctx, f.pool, cfg, capture.ID); err == nil {
		t.Fatal("re-drive with the handler still broken succeeded")
	}
	if got := f.count("SELECT count(*) FROM inbox WHERE event_id = $1 AND status = 'failed'", capture.ID); got != 1 {
		t.Fatal("a failed re-drive did not leave the event failed")
	}

	broken.Store(false)
	outcome, err := inbox.Redrive(ctx, f.pool, cfg, capture.ID)
	if err != nil || outcome != inbox.Processed {
		t.Fatalf("re-drive = %v, %v; want processed", outcome, err)
	}
	if got := f.count("SELECT count(*) FROM effects"); got != 2 {
		t.Errorf("effects after the re-drive = %d, want 2 (capture and the refund behind it)", got)
	}
	if _, err := inbox.Redrive(ctx, f.pool, cfg, capture.ID); !errors.Is(err, inbox.ErrNotFailed) {
		t.Errorf("second re-drive: %v, want ErrNotFailed", err)
	}
}

func TestPruneDeletesOnlyOldProcessedRowsInBatches(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	_, err := f.pool.Exec(ctx, `INSERT INTO inbox (event_id, event_type, payload, topic, kafka_partition, kafka_offset, status, processed_at)
		SELECT gen_random_uuid(), 'OrderCaptured', '{}', 't', 0, g,
		       CASE WHEN g % 10 = 0 THEN 'failed' ELSE 'processed' END,
		       CASE WHEN g <= 50 THEN now() - interval '2 hours' ELSE now() END
		FROM generate_series(1, 100) g`)
	if err != nil {
		t.Fatal(err)
	}
	n, err := inbox.Prune(ctx, f.pool, inbox.Config{Retention: time.Hour, RetentionBatch: 7})
	if err != nil {
		t.Fatal(err)
	}
	if n != 45 { // rows 1..50 are old; 5 of them are failed and kept
		t.Errorf("pruned %d rows, want 45", n)
	}
	if got := f.count("SELECT count(*) FROM inbox"); got != 55 {
		t.Errorf("%d rows left, want 55", got)
	}
}

// TestSweepAppliesParkedEventsLeftBehind: a process that applied an event
// and crashed before applying the parked events behind it leaves them
// received; the Runner's sweep applies them without any new delivery.
func TestSweepAppliesParkedEventsLeftBehind(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	// Order ord-8: sequence 1 applied, 2 and 3 parked, as a crash would leave them.
	if _, err := f.pool.Exec(ctx, `INSERT INTO inbox_sequences (aggregate_id, applied_sequence) VALUES ('ord-8', 1)`); err != nil {
		t.Fatal(err)
	}
	for _, e := range []*cloudEvent{event("ord-8", 3, "OrderRefunded"), event("ord-8", 2, "OrderRefunded")} {
		if _, err := f.pool.Exec(ctx, `INSERT INTO inbox (event_id, event_type, aggregate_id, sequence, payload, topic, kafka_partition, kafka_offset)
			VALUES ($1, $2, 'ord-8', $3, '{}', $4, 0, 0)`, e.ID, e.Type, e.Sequence, f.topic); err != nil {
			t.Fatal(err)
		}
	}
	f.start(f.config())
	testenv.Eventually(t, 30*time.Second, "the parked events applied", func() bool { return f.count("SELECT count(*) FROM effects") == 2 })
	if got := f.count("SELECT applied_sequence FROM inbox_sequences WHERE aggregate_id = 'ord-8'"); got != 3 {
		t.Errorf("applied sequence = %d, want 3", got)
	}
	if got := f.count("SELECT count(*) FROM effects WHERE sequence = 2 AND id < (SELECT id FROM effects WHERE sequence = 3)"); got != 1 {
		t.Error("the parked events were not applied in sequence")
	}
}

// TestAfterCommitErrorDeliversTheMessageAgain: an AfterCommit error fails
// the attempt after the commit, so the offset is not marked and the message
// is delivered again: a duplicate for the inbox, applied again without it.
func TestAfterCommitErrorDeliversTheMessageAgain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		disabled     bool
		wantEffects  int
		wantDups     int
		wantOutcomes []inbox.Outcome // seen by AfterCommit for the first event
	}{
		{name: "inbox on", wantEffects: 1, wantDups: 1, wantOutcomes: []inbox.Outcome{inbox.Processed, inbox.Duplicate}},
		{name: "inbox off", disabled: true, wantEffects: 2, wantOutcomes: []inbox.Outcome{inbox.Processed, inbox.Processed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			first, second := event("ord-ac1", 1, "OrderCaptured"), event("ord-ac2", 1, "OrderCaptured")
			var (
				mu       sync.Mutex
				outcomes []inbox.Outcome
				done     atomic.Bool
			)
			r := f.start(f.config(func(c *inbox.Config) {
				c.Unsafe.Disabled = tc.disabled
				c.AfterCommit = func(_ context.Context, msg inbox.Message, outcome inbox.Outcome) error {
					if msg.ID == second.ID {
						done.Store(true)
						return nil
					}
					mu.Lock()
					defer mu.Unlock()
					outcomes = append(outcomes, outcome)
					if len(outcomes) == 1 {
						return errBoom
					}
					return nil
				}
			}))
			f.publish(first, second) // one partition: the second goes through after the first
			testenv.Eventually(t, 60*time.Second, "the second event through", done.Load)
			mu.Lock()
			if !slices.Equal(outcomes, tc.wantOutcomes) {
				t.Errorf("AfterCommit saw %v for the first event, want %v", outcomes, tc.wantOutcomes)
			}
			mu.Unlock()
			if got := f.count("SELECT count(*) FROM effects WHERE event_id = $1", first.ID); got != tc.wantEffects {
				t.Errorf("effects = %d, want %d", got, tc.wantEffects)
			}
			if c := r.Counts(); c.Failed != 1 || c.Duplicates != tc.wantDups || c.DeadLettered != 0 {
				t.Errorf("failed, duplicates, dead-lettered = %d, %d, %d; want 1, %d, 0", c.Failed, c.Duplicates, c.DeadLettered, tc.wantDups)
			}
		})
	}
}
