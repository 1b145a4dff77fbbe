package bench

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/testkit/testenv"
)

// P1's paylab contenders are the orders binary's relay command in each mode:
// each drains the whole backlog into the topic (relayBinaryDrain waits for
// the n-th message), reports its own CPU, and leaves no slot behind.
func TestRelayBinaryDrain(t *testing.T) {
	t.Parallel()
	bin := testenv.BuildServices(t)
	e, ctx := testEnv(t, Config{Bin: bin, LogDir: t.TempDir()}, 10*time.Minute)
	const n, txs = 2000, 20
	for _, mode := range []string{"poll", "wal"} {
		res, err := e.relayBinaryDrain(ctx, mode, n, txs)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if res.Events != n || res.PerSecond <= 0 || res.PeerCPUSeconds <= 0 {
			t.Errorf("%s: %+v", mode, res)
		}
		t.Logf("orders relay, RELAY_MODE=%s: %d events in %.2fs, %.0f events/s, CPU %+v", mode, n, res.Seconds, res.PerSecond, res.CPU)
	}
	var slots int
	if err := withConn(ctx, testenv.AdminURL(), func(c *pgx.Conn) error {
		return c.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE $1", "paylab_bench_"+e.run+"_%").Scan(&slots)
	}); err != nil || slots != 0 {
		t.Errorf("%d of the run's slots left (%v), want none", slots, err)
	}
}
