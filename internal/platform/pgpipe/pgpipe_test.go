package pgpipe_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paylab/paylab/internal/platform/pgpipe"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// Held writes and queued reads travel with the next read, in order, in one
// round trip; the rest with the final statement.
func TestHeldWritesTravelWithTheNextRead(t *testing.T) {
	t.Parallel()
	pool, stmts := testenv.CountingPool(t, testenv.NewDatabase(t, "orders"))
	ctx := testenv.Context(t)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "CREATE TEMP TABLE t (n int)"); err != nil {
		t.Fatal(err)
	}
	trips := stmts.RoundTrips()
	w := pgpipe.New(conn.Conn(), "BEGIN")
	var count int
	for _, n := range []int{1, 2} {
		if _, err := w.Exec(ctx, "INSERT INTO t VALUES ($1)", n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			w.QueueRow("SELECT count(*) FROM t", nil, func(r pgx.Row) error { return r.Scan(&count) })
		}
	}
	var sum int
	if err := w.QueryRow(ctx, "SELECT sum(n) FROM t").Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Exec(ctx, "INSERT INTO t VALUES (4)"); err != nil {
		t.Fatal(err)
	}
	tag, err := w.Finish(ctx, "COMMIT")
	if err != nil || tag.String() != "COMMIT" {
		t.Fatalf("COMMIT: %q, %v", tag, err)
	}
	if got := stmts.RoundTrips() - trips; count != 1 || sum != 3 || got != 2 {
		t.Fatalf("count %d and sum %d read in %d round trips, want 1 and 3 in 2", count, sum, got)
	}
	if err := conn.QueryRow(ctx, "SELECT sum(n) FROM t").Scan(&sum); err != nil || sum != 7 {
		t.Fatalf("committed sum %d, %v; want 7", sum, err)
	}
}

// A held write that fails surfaces at the statement that sends it, and
// the server skips what followed it: COMMIT never runs.
func TestAFailedHeldWriteStopsThePipeline(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.NewPool(t, "orders")
	ctx := testenv.Context(t)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "CREATE TEMP TABLE t (n int CHECK (n > 0))"); err != nil {
		t.Fatal(err)
	}
	w := pgpipe.New(conn.Conn(), "BEGIN")
	_, _ = w.Exec(ctx, "INSERT INTO t VALUES (1)")
	_, _ = w.Exec(ctx, "INSERT INTO t VALUES (-1)")
	_, _ = w.Exec(ctx, "INSERT INTO t VALUES (2)")
	_, err = w.Finish(ctx, "COMMIT")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23514" {
		t.Fatalf("Finish: %v, want the check violation", err)
	}
	if s := conn.Conn().PgConn().TxStatus(); s != 'E' {
		t.Fatalf("transaction status %q after the failure, want E (failed, not committed)", s)
	}
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows, %v; want none", n, err)
	}
	var one int
	if err := pgpipe.New(conn.Conn()).QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("the connection after rollback: %d, %v", one, err)
	}
}
