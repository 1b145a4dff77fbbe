package chaosrun

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/paylab/paylab/internal/testkit/testenv"
)

// The WAL relay's own faults, on private servers as `paylab chaos run
// --relay-mode wal` starts them, lose nothing and leave nothing pending:
// its slot dropped under the reader, dropped and created again behind its
// back, its publication without the outbox table for a few seconds (the
// reader says it is not ready meanwhile), and an event for a topic that
// does not exist among the payments, which ends parked with its reason
// while the others flow.
func TestWALRelayFaultScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private PostgreSQL and Kafka")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e := &Env{Bin: testenv.BuildServices(t), Mailpit: testenv.MailpitBinary(t), LogDir: t.TempDir(), RelayMode: RelayWAL, KafkaNodes: 1}
	if err := e.Start(ctx); err != nil {
		e.Stop()
		t.Fatal(err)
	}
	defer e.Stop()

	scenarios, err := Select([]string{"wal-slot-dropped", "wal-slot-recreated", "wal-publication-drift", "wal-poison-event"}, false)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	results := Run(ctx, e, scenarios, Quick, 2, &log)
	notes := map[string]string{
		"wal-slot-dropped":      "back after",
		"wal-slot-recreated":    "created again by the superuser",
		"wal-publication-drift": "not ready for",
		"wal-poison-event":      "parked",
	}
	for _, r := range results {
		if !r.Pass || r.Lost != 0 || r.PendingOutbox != 0 || r.DupEffects != 0 || r.OutOfOrder != 0 {
			t.Errorf("%s: pass %t, %d lost, %d left pending, %d duplicate effects, %d out of order: %s %s",
				r.Scenario, r.Pass, r.Lost, r.PendingOutbox, r.DupEffects, r.OutOfOrder, r.Note, r.Error)
		}
		if want := notes[r.Scenario]; !strings.Contains(r.Note, want) {
			t.Errorf("%s: note %q, want it to say %q", r.Scenario, r.Note, want)
		}
	}
	if t.Failed() {
		t.Logf("run:\n%s", log.String())
	}
}
