package inbox

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/pkg/inbox/internal/inboxdb"
)

// Prune deletes processed rows of cfg's inbox table (Config.Table) older
// than cfg.Retention (on the database clock), cfg.RetentionBatch rows per
// statement so no statement holds many locks or builds a long transaction,
// until none are left. Received and failed rows are never pruned; a
// negative Retention keeps every row. It returns the number of rows deleted.
//
// The trade-off: a duplicate delivered after its row was pruned is not
// recognised by its event id. Keep retention longer than the longest replay
// horizon (Kafka's log retention, plus any manual offset reset window).
// Events with a sequence are still caught by their aggregate's applied
// sequence, which is never pruned.
func Prune(ctx context.Context, pool *pgxpool.Pool, cfg Config) (int64, error) {
	if err := cfg.validateOptional(); err != nil {
		return 0, err
	}
	cfg = cfg.withDefaults()
	if cfg.Retention <= 0 {
		return 0, nil
	}
	batch := cfg.RetentionBatch
	q := inboxdb.New(withTable(pool, cfg.Table, new(sync.Map)))
	var total int64
	for {
		n, err := q.PruneProcessed(ctx, inboxdb.PruneProcessedParams{
			RetentionSeconds: cfg.Retention.Seconds(), Batch: int32(batch),
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
