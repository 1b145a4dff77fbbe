package admin

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// Querier is what Writable needs of a database pool (*pgxpool.Pool).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ErrReadOnly: the database answers, but it is a replica (in recovery).
var ErrReadOnly = errors.New("the database is a replica: no leader takes writes")

// Writable is the /readyz check of a database the process writes to: ready
// when a connection of db reaches a server that takes writes. A server that
// does not answer, or answers as a replica, is not ready: that is what a
// process sees during a failover of a replicated PostgreSQL, until a leader
// is elected (its pool, listing every member with
// target_session_attrs=read-write, then connects to the new one).
func Writable(db Querier) Check {
	return func(ctx context.Context) error {
		var recovering bool
		if err := db.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovering); err != nil {
			return err
		}
		if recovering {
			return ErrReadOnly
		}
		return nil
	}
}
