// Package dbpool is how the processes open their pools (New, Configure: uuid.UUID
// encoded directly) and how a request takes a pooled connection: within
// a bound, so that a stuck database yields fast 503s instead of requests
// piling up behind each other until their clients give up.
package dbpool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNoConnection is Acquire's error when no connection came free within
// its timeout (the caller answers 503).
var ErrNoConnection = errors.New("no database connection free")

// Acquire takes a connection from pool, waiting at most timeout. Its error
// wraps ErrNoConnection when the timeout ran out while ctx still ran;
// otherwise it is the pool's (ctx's end, a failed connect).
func Acquire(ctx context.Context, pool *pgxpool.Pool, timeout time.Duration) (*pgxpool.Conn, error) {
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pool.Acquire(actx)
	if err != nil && ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
		return nil, fmt.Errorf("%w within %s: %w", ErrNoConnection, timeout, err)
	}
	return conn, err
}
