package bench

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/testkit/testenv"
)

// The WAL relay's drain on the local stack: 2000 events, or
// PAYLAB_BENCH_WAL_EVENTS (PAYLAB_BENCH_WAL_TXS transactions, default 100)
// to measure. drainWAL checks that every event was published and none is
// pending; this checks its statements and that its slot is gone.
func TestDrainWAL(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("PAYLAB_BENCH_WAL_EVENTS"))
	if n == 0 {
		n = 2000
	}
	txs, _ := strconv.Atoi(os.Getenv("PAYLAB_BENCH_WAL_TXS"))
	if txs == 0 {
		txs = 100
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	e, err := newEnv(ctx, Config{AdminURL: testenv.AdminURL(), Brokers: testenv.Brokers()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := e.close(); err != nil {
			t.Error(err)
		}
	}()
	res, err := e.drainWAL(ctx, n, txs)
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Statements; c.Batches < 1 || c.ByName[stmtDeletePublished] != c.Batches || c.PerBatch < 1 {
		t.Errorf("statements %+v: want one DeletePublished per batch", c)
	}
	var slots int
	if err := withConn(ctx, testenv.AdminURL(), func(c *pgx.Conn) error {
		return c.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE $1", "paylab_bench_"+e.run+"_%").Scan(&slots)
	}); err != nil || slots != 0 {
		t.Errorf("%d of the run's slots left (%v), want none", slots, err)
	}
	t.Logf("WAL relay drained %d events in %d transactions: %.2fs, %.0f events/s, CPU %+v",
		n, txs, res.Seconds, res.PerSecond, res.CPU)
}
