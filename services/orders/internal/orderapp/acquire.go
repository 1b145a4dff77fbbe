package orderapp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/internal/platform/dbpool"
	"github.com/paylab/paylab/services/orders/internal/order"
)

// DefaultAcquireTimeout is Config.AcquireTimeout's default.
const DefaultAcquireTimeout = 2 * time.Second

// acquire takes a connection from the pool, waiting at most the acquire
// timeout: when the database is stuck and holds every pooled connection,
// requests fail fast with order.ErrUnavailable (503) instead of piling up
// behind each other until their clients give up.
func (s *Service) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	conn, err := dbpool.Acquire(ctx, s.pool, s.acquireTimeout)
	switch {
	case err == nil:
		return conn, nil
	case errors.Is(err, dbpool.ErrNoConnection):
		return nil, errors.Join(order.ErrUnavailable, err)
	default:
		return nil, fmt.Errorf("acquiring a database connection: %w", translate(err))
	}
}
