package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Execer runs one statement; *pgxpool.Pool and *pgx.Conn satisfy it.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Notifier wakes the relays after commit, outside the writers'
// transactions, for a Writer whose Config sets NotifyAfterCommit. Call
// Notify once a transaction that enqueued events has committed; Run sends
// the NOTIFY. Notify never blocks: while one NOTIFY is on its way, every
// Notify folds into the next one, so a process sends at most one at a time
// however fast it commits, and no payment transaction waits for the
// notification lock. Create one per process and outbox table, and run it
// for the process's lifetime.
type Notifier struct {
	db      Execer
	channel string
	log     *slog.Logger
	kick    chan struct{}
	sent    atomic.Int64
}

// NewNotifier returns a Notifier that sends cfg's Channel on db (a pool: it
// borrows a connection per NOTIFY).
func NewNotifier(db Execer, cfg Config) (*Notifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("outbox: invalid config: %w", err)
	}
	cfg = cfg.withDefaults()
	return &Notifier{db: db, channel: cfg.Channel, log: cfg.Logger, kick: make(chan struct{}, 1)}, nil
}

// Notify asks for a NOTIFY to be sent after this call; it returns at once.
func (n *Notifier) Notify() {
	select {
	case n.kick <- struct{}{}:
	default: // one is already due: it covers this commit too
	}
}

// Sent is how many NOTIFYs Run has sent.
func (n *Notifier) Sent() int64 { return n.sent.Load() }

// notifyRetry is the pause after a failed NOTIFY. The relays poll anyway, so
// a failure costs latency, never an event.
const notifyRetry = 100 * time.Millisecond

// Run sends the NOTIFYs asked for until ctx ends; it returns nil then.
func (n *Notifier) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-n.kick:
		}
		if _, err := n.db.Exec(ctx, "SELECT pg_notify($1, '')", n.channel); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			n.log.WarnContext(ctx, "outbox notifier: NOTIFY failed; the relays will find the events by polling", "error", err)
			n.Notify()
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(notifyRetry):
			}
			continue
		}
		n.sent.Add(1)
	}
}
