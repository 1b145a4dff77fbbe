package bench

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/pkg/outbox"
)

// The WAL relay's drain on the local stack: 2000 events, or
// PAYLAB_BENCH_WAL_EVENTS (PAYLAB_BENCH_WAL_TXS transactions, default 100)
// to measure. drainWAL checks that every event was published and none is
// pending; this checks its statements and that its slot is gone.
func TestDrainWAL(t *testing.T) {
	n, txs := envInt("PAYLAB_BENCH_WAL_EVENTS", 2000), envInt("PAYLAB_BENCH_WAL_TXS", 100)
	e, ctx := testEnv(t, Config{}, 30*time.Minute)
	res, checks, err := e.drainWAL(ctx, n, txs, outbox.StandbyGuardAuto)
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Statements; c.Batches < 1 || c.ByName[stmtDeletePublished] != c.Batches || c.PerBatch < 1 {
		t.Errorf("statements %+v: want one DeletePublished per batch", c)
	}
	// The standby guard (auto, the default) on a server without
	// synchronous standbys: one reading, then one a second at most.
	if most := 1 + math.Ceil(res.Seconds); checks < 1 || checks > most {
		t.Errorf("the standby guard read the standbys' positions %v times in a %.2fs drain, want 1 to %v", checks, res.Seconds, most)
	}
	var slots int
	if err := withConn(ctx, testenv.AdminURL(), func(c *pgx.Conn) error {
		return c.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE $1", "paylab_bench_"+e.run+"_%").Scan(&slots)
	}); err != nil || slots != 0 {
		t.Errorf("%d of the run's slots left (%v), want none", slots, err)
	}
	t.Logf("WAL relay drained %d events in %d transactions: %.2fs, %.0f events/s, CPU %+v, standby guard readings %v",
		n, txs, res.Seconds, res.PerSecond, res.CPU, checks)
}

// The standby guard's cost on a server without synchronous standbys, to
// measure: PAYLAB_BENCH_WAL_GUARD_ROUNDS rounds (skipped without it) of
// the drain of TestDrainWAL (PAYLAB_BENCH_WAL_EVENTS, PAYLAB_BENCH_WAL_TXS)
// with the guard off and auto, alternated, off first in odd rounds; the
// medians are logged. Auto must cost next to nothing: one reading of
// pg_stat_replication a second.
func TestDrainWALStandbyGuardCost(t *testing.T) {
	rounds := envInt("PAYLAB_BENCH_WAL_GUARD_ROUNDS", 0)
	if rounds == 0 {
		t.Skip("PAYLAB_BENCH_WAL_GUARD_ROUNDS=N measures it")
	}
	n, txs := envInt("PAYLAB_BENCH_WAL_EVENTS", 20000), envInt("PAYLAB_BENCH_WAL_TXS", 100)
	e, ctx := testEnv(t, Config{}, 30*time.Minute)
	rates := map[outbox.StandbyGuard][]float64{}
	readings := map[outbox.StandbyGuard]float64{}
	for r := range rounds {
		order := []outbox.StandbyGuard{outbox.StandbyGuardOff, outbox.StandbyGuardAuto}
		if r%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, g := range order {
			res, checks, err := e.drainWAL(ctx, n, txs, g)
			if err != nil {
				t.Fatal(err)
			}
			rates[g] = append(rates[g], res.PerSecond)
			readings[g] += checks
			t.Logf("round %d, guard %s: %d events in %.2fs, %.0f events/s, %v readings", r+1, g, n, res.Seconds, res.PerSecond, checks)
		}
	}
	off, auto := medianOf(rates[outbox.StandbyGuardOff]), medianOf(rates[outbox.StandbyGuardAuto])
	t.Logf("median of %d rounds, %d events in %d transactions: guard off %.0f events/s, auto %.0f events/s (%+.1f%%); readings: off %v, auto %v",
		rounds, n, txs, off, auto, 100*(auto-off)/off, readings[outbox.StandbyGuardOff], readings[outbox.StandbyGuardAuto])
}

func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
