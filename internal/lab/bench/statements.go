package bench

import (
	"context"
	"maps"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// statements counts the statements the relays send, on the client side: a
// pgx tracer on every relay's connections (their pools and LISTEN
// connections) sees each statement once, whatever the query mode. A
// statement is named by its sqlc query name ("-- name: ClaimBatch :many"),
// or by its first word.
type statements struct {
	mu         sync.Mutex
	byName     map[string]int
	dispatched int // rows CompleteBatch recorded
	onComplete func(recorded int)
}

func newStatements() *statements { return &statements{byName: map[string]int{}} }

// Statement names the classification uses.
const (
	stmtClaim      = "ClaimBatch"
	stmtClaimEmpty = "ClaimBatch (leased nothing)"
	stmtComplete   = "CompleteBatch"
	// stmtDeletePublished is the WAL relay's one statement per batch.
	stmtDeletePublished = "DeletePublished"
)

// background statements are not part of publishing a batch: the gauges'
// refresh (its settings, query and transaction), retention, and the LISTEN
// of the notification connection. No statement of a batch runs in an
// explicit transaction.
var background = map[string]bool{"PendingStats": true, "StatsSettings": true, "BEGIN": true, "COMMIT": true, "ROLLBACK": true,
	"DeleteDispatched": true, "LISTEN": true}

type sqlKey struct{}

// TraceQueryStart implements pgx.QueryTracer.
func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, sqlKey{}, data.SQL)
}

// TraceQueryEnd implements pgx.QueryTracer.
func (s *statements) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	sql, _ := ctx.Value(sqlKey{}).(string)
	name := statementName(sql)
	rows := int(data.CommandTag.RowsAffected())
	if name == stmtClaim && (data.Err != nil || rows == 0) {
		name = stmtClaimEmpty // an idle poll, or one cut short when the relay stopped
	}
	s.mu.Lock()
	s.byName[name]++
	notify := s.onComplete
	if name == stmtComplete && data.Err == nil {
		s.dispatched += rows
	}
	recorded := s.dispatched
	s.mu.Unlock()
	if notify != nil && name == stmtComplete {
		notify(recorded)
	}
}

func statementName(sql string) string {
	sql = strings.TrimSpace(sql)
	if rest, ok := strings.CutPrefix(sql, "-- name: "); ok {
		if name, _, ok := strings.Cut(rest, " "); ok {
			return name
		}
	}
	if word, _, _ := strings.Cut(sql, " "); word != "" {
		return strings.ToUpper(word)
	}
	return "(empty)"
}

// StatementCounts is what the relays sent during a drain.
type StatementCounts struct {
	ByName  map[string]int `json:"by_name"`
	Total   int            `json:"total"`
	Batches int            `json:"batches"` // claims that leased at least one event
	// PerBatch counts every statement except the background ones and the
	// claims that found nothing, per batch: the cost of publishing a batch.
	PerBatch float64 `json:"per_batch"`
	// PerBatchAll counts every statement, per batch.
	PerBatchAll float64 `json:"per_batch_all"`
	PerEvent    float64 `json:"per_event"`
	// ServerTransactions is the database's own count of transactions
	// committed or rolled back while the relays ran (pg_stat_database): a
	// server-side check of Total (every relay statement is a transaction of
	// its own), which also holds autovacuum's and the run's two reads.
	ServerTransactions int64 `json:"server_transactions"`
}

func (s *statements) counts(events int) StatementCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := StatementCounts{ByName: maps.Clone(s.byName), Batches: s.byName[stmtClaim]}
	if c.Batches == 0 { // the WAL relay claims nothing: a batch is what it deletes
		c.Batches = s.byName[stmtDeletePublished]
	}
	publishing := 0
	for name, n := range s.byName {
		c.Total += n
		if !background[name] && name != stmtClaimEmpty {
			publishing += n
		}
	}
	if c.Batches > 0 {
		c.PerBatch = float64(publishing) / float64(c.Batches)
		c.PerBatchAll = float64(c.Total) / float64(c.Batches)
	}
	if events > 0 {
		c.PerEvent = float64(c.Total) / float64(events)
	}
	return c
}
