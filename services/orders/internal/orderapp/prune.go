package orderapp

import (
	"context"
	"fmt"
	"time"

	"github.com/paylab/paylab/services/orders/internal/orderdb"
)

// pruneBatch bounds one DELETE, so pruning never holds many locks at once.
const pruneBatch = 1000

// PruneIdempotencyKeys deletes the idempotency keys older than maxAge, as
// measured by the database clock, and returns how many it deleted.
func (s *Service) PruneIdempotencyKeys(ctx context.Context, maxAge time.Duration) (int64, error) {
	q := orderdb.New(s.pool)
	var total int64
	for {
		n, err := q.PruneIdempotencyKeys(ctx, orderdb.PruneIdempotencyKeysParams{
			MaxAgeSeconds: maxAge.Seconds(), BatchSize: pruneBatch,
		})
		if err != nil {
			return total, fmt.Errorf("pruning idempotency keys: %w", err)
		}
		total += n
		if n < pruneBatch {
			return total, nil
		}
	}
}

// RunPruner prunes idempotency keys older than maxAge every interval until
// ctx ends. Failures are logged; the next round tries again.
func (s *Service) RunPruner(ctx context.Context, interval, maxAge time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := s.PruneIdempotencyKeys(ctx, maxAge)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.ErrorContext(ctx, "pruning idempotency keys", "error", err)
		case n > 0:
			s.log.InfoContext(ctx, "pruned idempotency keys", "deleted", n, "max_age", maxAge.String())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
