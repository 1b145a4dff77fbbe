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
// sqlc query name ("-- name: ClaimBatch :many" counts as ClaimBatch; a
// transaction's begin, commit or rollback as "transaction"; any other
// statement as "other").
type Statements struct {
	mu     sync.Mutex
	byName map[string]int
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
	name := "other"
	if _, rest, ok := strings.Cut(d.SQL, "-- name: "); ok {
		name, _, _ = strings.Cut(rest, " ")
	}
	switch strings.ToLower(strings.TrimSpace(d.SQL)) {
	case "begin", "commit", "rollback":
		name = "transaction"
	}
	s.mu.Lock()
	s.byName[name]++
	s.mu.Unlock()
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (s *Statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

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
