package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/paylab/paylab/pkg/outbox/internal/outboxdb"
)

// retentionLoop deletes old dispatched events every RetentionInterval.
func (r *relayCore) retentionLoop(ctx context.Context) error {
	ticker := time.NewTicker(r.cfg.RetentionInterval)
	defer ticker.Stop()
	for {
		if n, err := r.DeleteDispatched(ctx); err != nil && ctx.Err() == nil {
			r.log.ErrorContext(ctx, "outbox retention failed", "error", err)
		} else if n > 0 {
			r.log.InfoContext(ctx, "outbox retention deleted dispatched events", "events", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// DeleteDispatched deletes the events dispatched longer than Retention ago
// (on the database clock), RetentionBatch rows per statement until none is
// left, and returns how many it deleted. Pending and parked events are never
// deleted. Several relays may run it at once.
func (r *relayCore) DeleteDispatched(ctx context.Context) (int64, error) {
	if r.cfg.Retention <= 0 {
		return 0, nil
	}
	var total int64
	for {
		n, err := r.queries.DeleteDispatched(ctx, outboxdb.DeleteDispatchedParams{
			RetentionSeconds: r.cfg.Retention.Seconds(),
			BatchSize:        int32(r.cfg.RetentionBatch),
		})
		total += n
		r.metrics.retentionDeleted.Add(float64(n))
		if err != nil {
			return total, fmt.Errorf("deleting dispatched events: %w", err)
		}
		if n < int64(r.cfg.RetentionBatch) {
			return total, nil
		}
	}
}
