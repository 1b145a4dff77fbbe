package bench

import (
	"testing"

	"github.com/paylab/paylab/internal/testkit/testenv"
)

// A query that keeps a backend busy shows in PostgreSQL's CPU time, the
// backend's exit included.
func TestSampleCPUCountsThePostgreSQLServer(t *testing.T) {
	t.Parallel()
	before := sampleCPU()
	if !before.ok {
		t.Skip("no PostgreSQL server process on this machine (an external server): the CPU figures are left out")
	}
	pool, _ := testenv.NewPool(t, "orders")
	ctx := testenv.Context(t)
	var n int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM generate_series(1, 3000000)`).Scan(&n); err != nil || n != 3000000 {
		t.Fatalf("count %d, %v", n, err)
	}
	pool.Close() // the backend exits: its time moves to the postmaster's children
	cpu := before.perEvent(sampleCPU(), 1, 0)
	if cpu == nil || cpu.PostgreSQL <= 0 {
		t.Fatalf("PostgreSQL CPU %+v, want some", cpu)
	}
}
