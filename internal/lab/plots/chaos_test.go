package plots

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/paylab/paylab/internal/lab/chaosrun"
)

// timeline is a kafka-down timeline: the backlog rises while Kafka is down
// and drains after, with a gap where no database answered.
func timeline() *chaosrun.Timeline {
	tl := &chaosrun.Timeline{Every: 250 * 1e6}
	for i := range 120 {
		at := float64(i) / 4
		s := chaosrun.Sample{At: at}
		if i < 50 || i > 53 {
			payments, pending := int64(min(i*5, 300)), int64(0)
			if at >= 5 && at < 20 {
				pending = int64((at - 5) * 20)
			} else if at >= 20 && at < 22 {
				pending = int64((22 - at) * 150)
			}
			entries, receipts, age := payments-pending, payments-pending, 0.0
			if pending > 0 {
				age = at - 5
			}
			s.Payments, s.Pending, s.OldestAge, s.Entries, s.Receipts = &payments, &pending, &age, &entries, &receipts
		}
		tl.Samples = append(tl.Samples, s)
	}
	tl.Marks = []chaosrun.Mark{{At: 5, Label: "Kafka stopped"}, {At: 20, Label: "Kafka started", End: true}}
	return tl
}

func TestChaosDrawsEachScenarioWithATimeline(t *testing.T) {
	t.Parallel()
	base := filepath.Join(t.TempDir(), "chaos-20261203T050823Z")
	results := []chaosrun.Result{
		{Scenario: "kafka-down", Mode: "outbox", Expect: chaosrun.Clean, Payments: 300, Pass: true, Timeline: timeline()},
		{Scenario: "postgres-restart", Skipped: "needs a server of its own"},
		{Scenario: "outbox-crash-after-commit", Error: "no sample", Timeline: &chaosrun.Timeline{}},
	}
	files, err := Chaos(results, base)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0] != base+"-kafka-down.svg" {
		t.Fatalf("files %v, want kafka-down's chart alone", files)
	}
	checkChart(t, base+"-kafka-down", "kafka-down (outbox, expected clean): PASS", "300 payments, 0 lost",
		"payments committed", "ledger journal entries", "receipts sent",
		"pending outbox rows", "oldest pending (s)", "Kafka stopped", "Kafka started", "fault starts", "fault ends")
}

// A run that recorded the API's 201s names the acknowledged payments lost in
// its title; one that did not says nothing of them.
func TestChaosTitleNamesAcknowledgedLost(t *testing.T) {
	r := chaosrun.Result{Scenario: "postgres-async-failover", Payments: 1677, Acknowledged: 1757, AckLost: 80, Phantom: 28}
	if got := chaosTitle(r); !strings.Contains(got, "1677 payments, 80 of 1757 acknowledged lost, 0 lost, 28 phantom") {
		t.Errorf("title %q", got)
	}
	r.Acknowledged, r.AckLost = 0, 0
	if got := chaosTitle(r); strings.Contains(got, "acknowledged") {
		t.Errorf("title %q names acknowledged payments it did not record", got)
	}
}
