package inbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/pkg/inbox/internal/inboxdb"
)

// Prune deletes processed inbox rows older than retention (on the database
// clock), batch rows per statement so no statement holds many locks or
// builds a long transaction, until none are left. Received and failed rows
// are never pruned. It returns the number of rows deleted.
//
// The trade-off: a duplicate delivered after its row was pruned is not
// recognised by its event id. Keep retention longer than the longest replay
// horizon (Kafka's log retention, plus any manual offset reset window).
// Events with a sequence are still caught by their aggregate's applied
// sequence, which is never pruned.
func Prune(ctx context.Context, pool *pgxpool.Pool, retention time.Duration, batch int) (int64, error) {
	if batch <= 0 {
		batch = 1000
	}
	q := inboxdb.New(pool)
	var total int64
	for {
		n, err := q.PruneProcessed(ctx, inboxdb.PruneProcessedParams{
			RetentionSeconds: retention.Seconds(), Batch: int32(batch),
		})
		total += n
		if err != nil {
			return total, fmt.Errorf("pruning the inbox: %w", err)
		}
		if n < int64(batch) {
			return total, nil
		}
	}
}
