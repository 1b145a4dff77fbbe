package outbox

import (
	"context"
	"fmt"
	"time"
)

// statsLoop refreshes the backlog gauges every StatsInterval.
func (r *relayCore) statsLoop(ctx context.Context) error {
	ticker := time.NewTicker(r.cfg.StatsInterval)
	defer ticker.Stop()
	for {
		if err := r.RefreshStats(ctx); err != nil && ctx.Err() == nil {
			r.log.WarnContext(ctx, "refreshing outbox gauges failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// RefreshStats sets the pending, oldest-pending-age and parked gauges from
// one query over the partial pending index.
func (r *relayCore) RefreshStats(ctx context.Context) error {
	s, err := r.queries.PendingStats(ctx)
	if err != nil {
		return fmt.Errorf("reading outbox backlog: %w", err)
	}
	r.metrics.pending.Set(float64(s.Pending))
	r.metrics.oldestPendingAge.Set(s.OldestPendingSeconds)
	r.metrics.parked.Set(float64(s.Parked))
	return nil
}
