package bench

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/paylab/paylab/internal/testkit/testenv"
)

// The WAL relay's drain on the local stack, when PAYLAB_BENCH_WAL_EVENTS
// sets its size (PAYLAB_BENCH_WAL_TXS transactions, default 100): events per
// second and the PostgreSQL server's CPU per event. Not part of the normal
// test run: it measures, it checks nothing beyond drainWAL's own checks.
func TestDrainWAL(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("PAYLAB_BENCH_WAL_EVENTS"))
	if n == 0 {
		t.Skip("set PAYLAB_BENCH_WAL_EVENTS to measure the WAL relay's drain")
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
	t.Logf("WAL relay drained %d events in %d transactions: %.2fs, %.0f events/s, CPU %+v",
		n, txs, res.Seconds, res.PerSecond, res.CPU)
}
