package main

import (
	"testing"
	"time"

	"github.com/paylab/paylab/internal/platform/chaos"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/pkg/inbox"
	"github.com/paylab/paylab/services/ledger/internal/ledger"
)

// TestInjectedErrorFailsTheAttempt arms the error action on the ledger's
// fault points. Before the commit the transaction rolls back and the event
// is retried like any failed handler: applied once after the failed
// attempts, or dead-lettered when all three attempts fail. After the commit
// the offset stays unmarked and the event is delivered again: the inbox
// skips it, and without the inbox it is applied twice.
//
// The topic has one partition and a second event (without fault: the armed
// count is used up by the first) is published behind the first, so once
// the second is applied the first has gone through all its attempts.
func TestInjectedErrorFailsTheAttempt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		point        string
		count        int64
		inboxEnabled bool
		// of the first event
		wantEntries, wantFailed int
		wantStatus              string // its inbox row; "" for none
		// of both events
		wantProcessed, wantDups, wantDead int
	}{
		{name: "before the commit: rolled back, retried, applied once", point: ledger.FaultAfterApplyBeforeCommit, count: 2,
			inboxEnabled: true, wantEntries: 1, wantFailed: 2, wantStatus: "processed", wantProcessed: 2},
		{name: "before the commit, every attempt: dead-lettered", point: ledger.FaultAfterApplyBeforeCommit, count: 3,
			inboxEnabled: true, wantEntries: 0, wantFailed: 3, wantStatus: "failed", wantProcessed: 1, wantDead: 1},
		{name: "after the commit: delivered again, skipped", point: ledger.FaultAfterApplyBeforeOffsetCommit, count: 1,
			inboxEnabled: true, wantEntries: 1, wantFailed: 1, wantStatus: "processed", wantProcessed: 2, wantDups: 1},
		{name: "after the commit, inbox off: delivered again, applied again", point: ledger.FaultAfterApplyBeforeOffsetCommit, count: 1,
			inboxEnabled: false, wantEntries: 2, wantFailed: 1, wantProcessed: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 1)
			faults := chaos.NewRegistry()
			fault := faults.Points(ledger.FaultAfterApplyBeforeCommit, ledger.FaultAfterApplyBeforeOffsetCommit)
			if err := faults.Arm(tc.point, chaos.Fault{Action: chaos.Error, Count: tc.count}); err != nil {
				t.Fatal(err)
			}
			e := testenv.OrderCaptured("ord-err", "cus_e", "mer_e", 2500, "EUR")
			next := testenv.OrderCaptured("ord-next", "cus_n", "mer_n", 700, "EUR")
			f.Publish(e, next)
			a, _, _ := f.startWithFault(f.config(tc.inboxEnabled), fault)

			// The runner counts a message once its transaction has committed,
			// just after the effect is visible: wait for both.
			counted := func(c inbox.Counts) bool {
				return c.Processed >= tc.wantProcessed && c.Duplicates >= tc.wantDups && c.DeadLettered >= tc.wantDead
			}
			testenv.Eventually(t, 90*time.Second, "the second event applied and counted", func() bool {
				return f.Count("SELECT count(*) FROM journal_entries WHERE event_id = $1", next.ID) >= 1 && counted(a.Runner.Counts())
			})
			if st, err := faults.Status(tc.point); err != nil || st.Armed {
				t.Errorf("the fault is still armed (%v): it fired fewer than %d times", err, tc.count)
			}
			if got := f.Count("SELECT count(*) FROM journal_entries WHERE event_id = $1", e.ID); got != tc.wantEntries {
				t.Errorf("entries of the first event = %d, want %d", got, tc.wantEntries)
			}
			if tc.wantStatus != "" {
				if got := f.Count("SELECT count(*) FROM inbox WHERE event_id = $1 AND status = $2", e.ID, tc.wantStatus); got != 1 {
					t.Errorf("the first event is not %s in the inbox", tc.wantStatus)
				}
			}
			c := a.Runner.Counts()
			if c.Failed != tc.wantFailed {
				t.Errorf("failed attempts = %d, want %d (one per injected error)", c.Failed, tc.wantFailed)
			}
			if c.Processed != tc.wantProcessed || c.Duplicates != tc.wantDups || c.DeadLettered != tc.wantDead {
				t.Errorf("processed, duplicates, dead-lettered = %d, %d, %d; want %d, %d, %d",
					c.Processed, c.Duplicates, c.DeadLettered, tc.wantProcessed, tc.wantDups, tc.wantDead)
			}
		})
	}
}
