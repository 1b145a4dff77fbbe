package chaosrun

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/testkit/testenv"
)

// With RELAY_MODE=wal, on private servers as `paylab chaos run --relay-mode
// wal` starts them: the reader killed in the middle of the stream, and the
// reader crashing after Kafka acknowledged a batch, lose nothing and apply
// nothing twice; the orders role got REPLICATION, and every deployment's
// slot is gone once its scenario ended.
func TestWALRelayScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private PostgreSQL and Kafka")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	e := &Env{Bin: testenv.BuildServices(t), Mailpit: testenv.MailpitBinary(t), LogDir: t.TempDir(), RelayMode: RelayWAL, KafkaNodes: 1}
	if err := e.Start(ctx); err != nil {
		e.Stop()
		t.Fatal(err)
	}
	defer e.Stop()

	scenarios, err := Select([]string{"relay-killed-holding-leases", "relay-crash-after-publish"}, false)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	results := Run(ctx, e, scenarios, Quick, 2, &log)
	for _, r := range results {
		if !r.Pass || r.Lost != 0 || r.DupEffects != 0 || !strings.Contains(r.Mode, "wal relay") {
			t.Errorf("%s (%s): pass %t, %d lost, %d duplicate effects: %s %s", r.Scenario, r.Mode, r.Pass, r.Lost, r.DupEffects, r.Note, r.Error)
		}
	}
	if killed := results[0]; !strings.Contains(killed.Note, "killed mid-stream") {
		t.Errorf("relay-killed-holding-leases did not kill the WAL reader: %s", killed.Note)
	}
	if t.Failed() {
		t.Logf("run:\n%s", log.String())
	}

	conn, err := pgx.Connect(ctx, e.adminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var replication bool
	var slots int
	if err := conn.QueryRow(ctx, `SELECT rolreplication FROM pg_roles WHERE rolname = 'orders'`).Scan(&replication); err != nil || !replication {
		t.Errorf("the orders role has no REPLICATION attribute (%v)", err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots`).Scan(&slots); err != nil || slots != 0 {
		t.Errorf("%d replication slots left after the scenarios (%v)", slots, err)
	}
}
