package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Notifier wakes the relays after commit, outside the writers'
// transactions, for a Writer whose Config sets NotifyAfterCommit. Call
// Notify once a transaction that enqueued events has committed; Run sends
// the NOTIFY. Notify never blocks: while one NOTIFY is on its way, every
// Notify folds into the next one, so a process sends at most one at a time,
// and no more than one per Config.NotifyInterval, however fast it commits;
// no payment transaction waits for the notification lock, nor for a
// connection: the Notifier has its own.
// Create one per process and outbox table, and run it for the process's
// lifetime.
type Notifier struct {
	conn     *pgx.ConnConfig
	channel  string
	interval time.Duration
	log      *slog.Logger
	kick     chan struct{}
	sent     atomic.Int64
}

// NewNotifier returns a Notifier that sends cfg's Channel on a connection
// of its own to conn's database (a pool's: pool.Config().ConnConfig). It
// logs a failed NOTIFY to log (nil: discarded).
func NewNotifier(conn *pgx.ConnConfig, cfg Config, log *slog.Logger) (*Notifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("outbox: invalid config: %w", err)
	}
	cfg.withNames()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if conn == nil {
		return nil, errors.New("outbox: NewNotifier needs a connection config")
	}
	conn = conn.Copy()
	if conn.RuntimeParams == nil {
		conn.RuntimeParams = map[string]string{}
	}
	conn.RuntimeParams["application_name"] = cfg.Table + "-notifier"
	return &Notifier{conn: conn, channel: cfg.Channel, interval: pacing(cfg.NotifyInterval, DefaultNotifyInterval), log: log, kick: make(chan struct{}, 1)}, nil
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

// Run sends the NOTIFYs asked for until ctx ends; it returns nil then. A
// failed NOTIFY (or connection) is retried on a new connection after a
// pause; meanwhile the relays poll.
func (n *Notifier) Run(ctx context.Context) error {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.WithoutCancel(ctx))
		}
	}()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-n.kick:
		}
		if wait := n.interval - time.Since(last); wait > 0 {
			pause(ctx, wait) // the Notify calls meanwhile fold into this one
		}
		last = time.Now()
		err := func() (err error) {
			if conn == nil {
				if conn, err = pgx.ConnectConfig(ctx, n.conn); err != nil {
					return err
				}
			}
			_, err = conn.Exec(ctx, "SELECT pg_notify($1, '')", n.channel)
			return err
		}()
		if err == nil {
			n.sent.Add(1)
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		n.log.WarnContext(ctx, "outbox notifier: NOTIFY failed; the relays will find the events by polling", "error", err)
		if conn != nil {
			conn.Close(context.WithoutCancel(ctx))
			conn = nil
		}
		n.Notify()
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(notifyRetry):
		}
	}
}
