package main

import (
	"testing"
	"time"

	"github.com/paylab/paylab/internal/testenv"
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
			if code := first.Wait(t, 60*time.Second); code != testenv.CrashCode {
				t.Fatalf("the ledger exited with %d, want the crash code %d\n%s", code, testenv.CrashCode, first.Output())
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
	return testenv.StartConsumerChild(t, "ledger", cfg.Config, crashAt, "HTTP_ADDR=127.0.0.1:0")
}
