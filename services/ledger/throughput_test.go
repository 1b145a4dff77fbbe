package main

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/paylab/paylab/internal/testenv"
	"github.com/paylab/paylab/pkg/outbox"
)

// TestThroughput measures how fast the ledger drains a pre-filled topic
// (default 100 000 messages on 6 partitions). It is a measurement, not a
// check, and is skipped unless PAYLAB_THROUGHPUT is set (make bench-consumers;
// PAYLAB_THROUGHPUT_EVENTS changes the count). Run it without -race.
func TestThroughput(t *testing.T) {
	if os.Getenv("PAYLAB_THROUGHPUT") == "" {
		t.Skip("a measurement: set PAYLAB_THROUGHPUT=1 (make bench-consumers)")
	}
	total := 100_000
	if n, err := strconv.Atoi(os.Getenv("PAYLAB_THROUGHPUT_EVENTS")); err == nil && n > 0 {
		total = n
	}
	for _, tc := range []struct {
		name         string
		inboxEnabled bool
		dupEvery     int // every dupEvery-th message re-sends an earlier event; 0 = none
		batch        int
	}{
		{name: "inbox on, all unique", inboxEnabled: true, batch: 1},
		{name: "inbox on, 20% duplicates", inboxEnabled: true, dupEvery: 5, batch: 1},
		{name: "inbox off, all unique", inboxEnabled: false, batch: 1},
		{name: "inbox on, all unique, batches of 64", inboxEnabled: true, batch: 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 6)
			var sent []*outbox.Event
			batch := make([]*outbox.Event, 0, 1000)
			for i := 0; i < total; i++ {
				var e *outbox.Event
				if tc.dupEvery > 0 && i%tc.dupEvery == tc.dupEvery-1 {
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
			unique := len(sent)

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
			elapsed, consuming := time.Since(start), time.Since(first)
			c := a.Runner.Counts()
			t.Logf("%s: %d messages (%d unique, %d duplicates skipped) in %s: %.0f messages/s; %.0f messages/s after the first commit (group join excluded)",
				tc.name, total, unique, c.Duplicates, elapsed.Round(time.Millisecond),
				float64(total)/elapsed.Seconds(), float64(total)/consuming.Seconds())
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
