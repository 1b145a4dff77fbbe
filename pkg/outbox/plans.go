package outbox

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paylab/paylab/pkg/outbox/internal/outboxdb"
)

// customPlans runs every relay statement as an unnamed statement
// (pgx.QueryExecModeCacheDescribe: parsed anew at each execution, with the
// statement's description cached so that results come back in binary in
// one round trip), which PostgreSQL plans afresh with the actual parameters
// and the table's current size.
//
// With pgx's default statement cache, PostgreSQL switches a prepared
// statement to a generic plan after five executions. A plan made while the
// outbox was empty (a relay starting on a fresh or drained table) keeps a
// sequential scan inside the NOT EXISTS ordering check: quadratic in the
// backlog, seconds per claim at ten thousand rows, minutes beyond — while
// the claim holds its row locks. Custom plans cost a little planning per
// statement (two statements per batch) and stay index-driven at any size.
// (pgx.QueryExecModeExec plans the same way but returns text: parsing a
// batch's timestamps, ids and numbers from text cost the relay more than
// the rest of its decoding.)
type customPlans struct{ db outboxdb.DBTX }

func withCustomPlans(db outboxdb.DBTX) outboxdb.DBTX { return customPlans{db: db} }

func (c customPlans) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return c.db.Exec(ctx, sql, append([]any{pgx.QueryExecModeCacheDescribe}, args...)...)
}

func (c customPlans) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return c.db.Query(ctx, sql, append([]any{pgx.QueryExecModeCacheDescribe}, args...)...)
}

func (c customPlans) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return c.db.QueryRow(ctx, sql, append([]any{pgx.QueryExecModeCacheDescribe}, args...)...)
}
