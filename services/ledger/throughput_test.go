package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/pkg/outbox"
)

// TestThroughput measures how fast the ledger drains a pre-filled topic
// (default 100 000 messages on 6 partitions), and, as the baseline the
// figures are read against, how fast a bare sarama consumer group reads the
// same topic. It is a measurement, not a check, and is skipped unless
// PAYLAB_THROUGHPUT is set (make bench-consumers; PAYLAB_THROUGHPUT_EVENTS
// changes the count). Run it without -race.
func TestThroughput(t *testing.T) {
	if os.Getenv("PAYLAB_THROUGHPUT") == "" {
		t.Skip("a measurement: set PAYLAB_THROUGHPUT=1 (make bench-consumers)")
	}
	total := 100_000
	if n, err := strconv.Atoi(os.Getenv("PAYLAB_THROUGHPUT_EVENTS")); err == nil && n > 0 {
		total = n
	}
	t.Run("raw consumer group, no database", func(t *testing.T) {
		f := newFixture(t, 6)
		f.fill(total, 0)
		var read atomic.Int64
		start := time.Now()
		first := f.rawConsume(t, &read)
		testenv.Eventually(t, 30*time.Minute, "the topic read", func() bool { return read.Load() >= int64(total) })
		report(t, "raw consumer group", total, start, first.Load().(time.Time))
	})
	for _, tc := range []struct {
		name         string
		inboxEnabled bool
		dupEvery     int // every dupEvery-th message re-sends an earlier event; 0 = none
		batch        int
	}{
		{name: "inbox on, all unique", inboxEnabled: true, batch: 500},
		{name: "inbox on, 20% duplicates", inboxEnabled: true, dupEvery: 5, batch: 500},
		{name: "inbox off, all unique", inboxEnabled: false, batch: 500},
		{name: "inbox on, all unique, one message per transaction", inboxEnabled: true, batch: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 6)
			unique := f.fill(total, tc.dupEvery)

			start := time.Now()
			cfg := f.config(tc.inboxEnabled)
			cfg.InboxBatchSize = tc.batch
			a, _ := f.start(cfg)
			var first time.Time
			testenv.Eventually(t, 30*time.Minute, "the topic drained", func() bool {
				c := a.Runner.Counts()
				if first.IsZero() && c.Processed > 0 {
					first = time.Now()
				}
				return c.Processed+c.Duplicates+c.DeadLettered >= total
			})
			c := a.Runner.Counts()
			report(t, fmt.Sprintf("%s (%d unique, %d duplicates skipped)", tc.name, unique, c.Duplicates), total, start, first)
			wantEntries := unique
			if !tc.inboxEnabled {
				wantEntries = total
			}
			if c.DeadLettered != 0 {
				t.Errorf("%d events dead-lettered", c.DeadLettered)
			}
			if got := f.Count("SELECT count(*) FROM journal_entries"); got != wantEntries {
				t.Errorf("journal entries = %d, want %d", got, wantEntries)
			}
		})
	}
}

func report(t *testing.T, name string, total int, start, first time.Time) {
	t.Helper()
	elapsed, consuming := time.Since(start), time.Since(first)
	t.Logf("%s: %d messages in %s: %.0f messages/s; %.0f messages/s after the first one (group join excluded)",
		name, total, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(), float64(total)/consuming.Seconds())
}

// fill pre-fills the topic with total OrderCaptured events (1000 customers,
// 50 merchants); every dupEvery-th message (0: none) re-sends an earlier
// event. It returns the number of distinct events.
func (f *fixture) fill(total, dupEvery int) int {
	f.T.Helper()
	var sent []*outbox.Event
	batch := make([]*outbox.Event, 0, 1000)
	for i := 0; i < total; i++ {
		var e *outbox.Event
		if dupEvery > 0 && i%dupEvery == dupEvery-1 {
			e = sent[(i*7919)%len(sent)] // an earlier event, again
		} else {
			e = testenv.OrderCaptured(fmt.Sprintf("ord-%d", i), fmt.Sprintf("cus_%d", i%1000), fmt.Sprintf("mer_%d", i%50), 100+int64(i%900), "EUR")
			sent = append(sent, e)
		}
		batch = append(batch, e)
		if len(batch) == cap(batch) || i == total-1 {
			f.publishBatch(batch)
			batch = batch[:0]
		}
	}
	return len(sent)
}

// rawConsume reads the topic with a bare sarama consumer group configured as
// the ledger's (broker.Config, oldest offset, auto-commit), marking every
// message, until the test ends. It counts messages in read; first holds the
// time of the first one.
func (f *fixture) rawConsume(t *testing.T, read *atomic.Int64) *atomic.Value {
	cfg := broker.Config("ledger-raw")
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = true
	group, err := sarama.NewConsumerGroup(testenv.Brokers(), "raw-"+f.Topic, cfg)
	if err != nil {
		t.Fatal(err)
	}
	first := &atomic.Value{}
	first.Store(time.Time{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			_ = group.Consume(ctx, []string{f.Topic}, rawHandler{read: read, first: first})
		}
	}()
	t.Cleanup(func() { cancel(); <-done; _ = group.Close() })
	return first
}

type rawHandler struct {
	read  *atomic.Int64
	first *atomic.Value
}

func (rawHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (rawHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h rawHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		if h.read.Add(1) == 1 {
			h.first.Store(time.Now())
		}
		sess.MarkMessage(m, "")
	}
	return nil
}

// publishBatch sends events as the relay does, in one produce request per
// batch.
func (f *fixture) publishBatch(events []*outbox.Event) {
	f.T.Helper()
	msgs := make([]*sarama.ProducerMessage, 0, len(events))
	for _, e := range events {
		e.Topic = f.Topic
		msgs = append(msgs, e.ProducerMessage("/paylab/orders"))
	}
	if err := f.Prod.SendMessages(msgs); err != nil {
		f.T.Fatal(err)
	}
}
