package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/paylab/paylab/internal/testkit/consumertest"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/services/ledger/internal/ledger"
)

// TestCrashAfterApplyBeforeOffsetCommit kills a real ledger process after
// its transaction committed and before the offset was committed. Kafka
// re-delivers the event to the restarted process: with the inbox it is
// skipped (one entry), without it it is applied again (two entries).
func TestCrashAfterApplyBeforeOffsetCommit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		inboxEnabled bool
		wantEntries  int
	}{
		{name: "inbox on: redelivery skipped", inboxEnabled: true, wantEntries: 1},
		{name: "inbox off: redelivery applied again", inboxEnabled: false, wantEntries: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 3)
			cfg := f.config(tc.inboxEnabled)
			e := testenv.OrderCaptured("ord-crash", "cus_9", "mer_9", 4200, "EUR")
			f.Publish(e)

			first := startChild(t, cfg, ledger.FaultAfterApplyBeforeOffsetCommit)
			if code := first.Wait(t, 60*time.Second); code != consumertest.CrashCode {
				t.Fatalf("the ledger exited with %d, want the crash code %d\n%s", code, consumertest.CrashCode, first.Output())
			}
			if got := f.Count("SELECT count(*) FROM journal_entries WHERE event_id = $1", e.ID); got != 1 {
				t.Fatalf("entries at the crash = %d, want 1 (the transaction committed)", got)
			}

			second := startChild(t, cfg, "")
			testenv.Eventually(t, 60*time.Second, "the redelivery", func() bool {
				return second.Metric("paylab_inbox_processed_total")+second.Metric("paylab_inbox_duplicates_total") >= 1
			})
			if got := f.Count("SELECT count(*) FROM journal_entries WHERE event_id = $1", e.ID); got != tc.wantEntries {
				t.Errorf("entries after the restart = %d, want %d", got, tc.wantEntries)
			}
			wantDups := 0
			if tc.inboxEnabled {
				wantDups = 1
			}
			if got := second.Metric("paylab_inbox_duplicates_total"); got != wantDups {
				t.Errorf("duplicates counted = %d, want %d", got, wantDups)
			}
			second.Stop(t)
		})
	}
}

// startChild runs this test binary as a ledger process (see TestMain).
func startChild(t *testing.T, cfg config, crashAt string) *testenv.Child {
	t.Helper()
	return consumertest.StartChild(t, "ledger", cfg.Config, crashAt, "HTTP_ADDR=127.0.0.1:0")
}

// TestCrashMidBatch kills a real ledger process applying batches (the
// default INBOX_BATCH_SIZE) at two points. Inside a batch's transaction,
// after its entries were written and before the commit: nothing of the
// batch is left applied, and the restarted process applies every event
// once. After a batch committed and before its offsets were committed: Kafka
// re-delivers the whole batch and the inbox absorbs every message of it.
func TestCrashMidBatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		point      string
		wantOnDisk bool // the first batch committed before the crash
	}{
		{name: "before the batch commits", point: ledger.FaultAfterApplyBeforeCommit},
		{name: "after the batch committed", point: ledger.FaultAfterApplyBeforeOffsetCommit, wantOnDisk: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const orders = 60
			f := newFixture(t, 3)
			cfg := f.config(true)
			var events []*outbox.Event
			for i := range orders {
				id := fmt.Sprintf("ord-batch-%02d", i)
				events = append(events, testenv.OrderCaptured(id, fmt.Sprintf("cus_%d", i%7), fmt.Sprintf("mer_%d", i%3), 1000, "EUR"))
				if i%2 == 0 {
					events = append(events, testenv.OrderRefunded(id, 2, 400, "EUR"))
				}
			}
			f.Publish(events...)

			first := startChild(t, cfg, tc.point)
			if code := first.Wait(t, 60*time.Second); code != consumertest.CrashCode {
				t.Fatalf("the ledger exited with %d, want the crash code %d\n%s", code, consumertest.CrashCode, first.Output())
			}
			entries, inboxRows := f.Count("SELECT count(*) FROM journal_entries"), f.Count("SELECT count(*) FROM inbox")
			if tc.wantOnDisk != (entries > 0) || entries != inboxRows {
				t.Fatalf("at the crash: %d entries, %d inbox rows; want a whole batch committed: %v", entries, inboxRows, tc.wantOnDisk)
			}
			if tc.wantOnDisk && entries < 2 {
				t.Fatalf("at the crash: %d entries, want a batch of several", entries)
			}

			second := startChild(t, cfg, "")
			testenv.Eventually(t, 60*time.Second, "every event applied", func() bool {
				return f.Count("SELECT count(*) FROM journal_entries") >= len(events)
			})
			testenv.Eventually(t, 30*time.Second, "the redeliveries absorbed", func() bool {
				return second.Metric("paylab_inbox_duplicates_total") >= entries
			})
			if got := f.Count("SELECT count(*) FROM journal_entries"); got != len(events) {
				t.Errorf("entries = %d, want one per event (%d)", got, len(events))
			}
			if got := f.Count("SELECT count(DISTINCT event_id) FROM journal_entries"); got != len(events) {
				t.Errorf("%d distinct events have entries, want %d", got, len(events))
			}
			if got := second.Metric("paylab_inbox_duplicates_total"); got != entries {
				t.Errorf("duplicates counted = %d, want the %d events committed before the crash", got, entries)
			}
			second.Stop(t)
		})
	}
}
