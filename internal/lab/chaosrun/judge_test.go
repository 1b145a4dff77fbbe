package chaosrun

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/paylab/paylab/internal/lab/reconcile"
)

// settledReport is a settled run of n captures, each applied once by both
// consumers.
func settledReport(n int) reconcile.Report {
	eff := reconcile.Effects{Expected: n, Applied: n}
	return reconcile.Report{Captures: n, Ledger: eff, Notifications: eff, Settled: true, Wire: &reconcile.Wire{}}
}

// leftPending adds outbox rows 101.. left pending to rep.
func leftPending(rep reconcile.Report, n int) reconcile.Report {
	rep.Outbox = reconcile.Backlog{Pending: n, HighWater: 200, Oldest: time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)}
	for i := range min(n, 10) {
		rep.Outbox.IDs = append(rep.Outbox.IDs, int64(101+i))
	}
	return rep
}

func TestJudgeFailsEveryExpectationWhenOutboxRowsAreLeftPending(t *testing.T) {
	t.Parallel()
	lost := settledReport(10)
	lost.Ledger.Lost, lost.Ledger.Applied = 3, 7
	dupOnWire := settledReport(10)
	dupOnWire.Wire.Duplicates = 4
	dupEffects := settledReport(10)
	dupEffects.Ledger.Duplicate = 2
	phantom := settledReport(10)
	phantom.Ledger.Phantom = 1
	for _, tc := range []struct {
		name   string
		expect Expect
		rep    reconcile.Report
		zombie int
	}{
		{"clean", Clean, settledReport(10), 0},
		{"clean, duplicates on the wire", CleanWithWireDuplicates, dupOnWire, 0},
		{"lost", Lost, lost, 0},
		{"phantom", Phantom, phantom, 0},
		{"duplicate effects", DuplicateEffects, dupEffects, 0},
		{"zombie writes", ZombieWrites, settledReport(10), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// What the scenario expects shows, and nothing is pending: it passes.
			r := Result{Scenario: tc.name, Expect: tc.expect, Zombie: tc.zombie}
			r.judge(tc.rep)
			if !r.Pass || r.Error != "" || r.PendingOutbox != 0 {
				t.Fatalf("nothing pending: %s, pending %d, error %q; want PASS", r.verdict(), r.PendingOutbox, r.Error)
			}
			// The same with 16 rows left pending fails, and says which.
			r = Result{Scenario: tc.name, Expect: tc.expect, Zombie: tc.zombie}
			r.judge(leftPending(tc.rep, 16))
			want := "16 outbox rows left pending after the pipeline settled: ids 101, 102, 103, 104, 105, 106, 107, 108, 109, 110 and 6 more, oldest inserted 2025-01-01T12:00:00Z"
			if r.Pass || r.PendingOutbox != 16 || r.Error != want {
				t.Fatalf("16 pending: %s, pending %d, error %q; want FAIL with %q", r.verdict(), r.PendingOutbox, r.Error, want)
			}
		})
	}
}

func TestJudgeNotesAPipelineThatDidNotSettle(t *testing.T) {
	t.Parallel()
	rep := settledReport(10)
	rep.Settled = false
	r := Result{Expect: Clean, Note: "orders crashed 2×"}
	r.judge(rep)
	if !r.Pass || r.Note != "orders crashed 2×; the pipeline had not settled by the deadline: the figures are those of the last read" {
		t.Fatalf("%s, note %q", r.verdict(), r.Note)
	}
}

func TestTableShowsThePendingOutboxRows(t *testing.T) {
	t.Parallel()
	r := Result{Scenario: "relay-crash-after-publish", Mode: "outbox, wal relay", Expect: CleanWithWireDuplicates}
	r.judge(leftPending(settledReport(300), 16))
	var out bytes.Buffer
	Table(&out, []Result{r, {Scenario: "kafka-down", Skipped: "stops Kafka"}})
	lines := strings.Split(out.String(), "\n")
	// tabwriter aligns the cells: the row's figure starts where its
	// column's name does.
	col := strings.Index(lines[0], "pending outbox")
	if col < 0 || len(lines[1]) <= col || strings.Fields(lines[1][col:])[0] != "16" ||
		!strings.Contains(out.String(), "relay-crash-after-publish: 16 outbox rows left pending") {
		t.Fatalf("the table does not show 16 pending outbox rows:\n%s", out.String())
	}
}
