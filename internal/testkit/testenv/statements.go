package testenv

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Statements counts the statements run on a pool's connections, by their
// sqlc query name ("-- name: ClaimBatch :many" counts as ClaimBatch; any
// other statement as "other"), those sent in a batch (a pipeline) too, and
// the round trips: a statement alone or a batch is one.
type Statements struct {
	mu     sync.Mutex
	byName map[string]int
	trips  int
}

// CountingPool opens a pool on dbURL whose statements the returned
// Statements counts; the pool is closed at cleanup.
func CountingPool(t testing.TB, dbURL string) (*pgxpool.Pool, *Statements) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	s := &Statements{byName: map[string]int{}}
	cfg.ConnConfig.Tracer = s
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, s
}

// TraceQueryStart implements pgx.QueryTracer.
func (s *Statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.count(d.SQL, 1)
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (s *Statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer.
func (s *Statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	s.mu.Lock()
	s.trips++
	s.mu.Unlock()
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (s *Statements) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	s.count(d.SQL, 0)
}

// TraceBatchEnd implements pgx.BatchTracer.
func (s *Statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (s *Statements) count(sql string, trips int) {
	name := "other"
	if _, rest, ok := strings.Cut(sql, "-- name: "); ok {
		name, _, _ = strings.Cut(rest, " ")
	}
	s.mu.Lock()
	s.byName[name]++
	s.trips += trips
	s.mu.Unlock()
}

// RoundTrips returns how many statements alone and batches were sent so
// far (a statement pgx prepares first costs one more, not counted).
func (s *Statements) RoundTrips() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.trips
}

// Counts returns the counts so far, by name.
func (s *Statements) Counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.byName)
}

// Total returns how many statements ran so far.
func (s *Statements) Total() int {
	n := 0
	for _, c := range s.Counts() {
		n += c
	}
	return n
}
