package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// listen keeps a dedicated connection LISTENing on Config.Channel and wakes
// the dispatch loop on every notification. When the connection drops it is
// reopened with a backoff; until then the poll interval keeps the relay
// going. Every (re)connection also wakes the loop, for notifications missed
// while disconnected.
func (r *Relay) listen(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for {
		listening, err := r.listenOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		r.poll.listenerReconnects.Inc()
		r.log.WarnContext(ctx, "outbox listener disconnected; reconnecting", "error", err, "backoff", backoff)
		if listening {
			backoff = 100 * time.Millisecond
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// listenOnce connects, listens and forwards notifications until the
// connection fails; listening reports whether LISTEN succeeded.
func (r *Relay) listenOnce(ctx context.Context) (listening bool, err error) {
	cfg := r.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = r.cfg.Table + "-listener"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, fmt.Errorf("connecting: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{r.cfg.Channel}.Sanitize()); err != nil {
		return false, fmt.Errorf("listening on %s: %w", r.cfg.Channel, err)
	}
	r.signal()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return true, fmt.Errorf("waiting for notifications: %w", err)
		}
		r.signal()
	}
}

// signal wakes the dispatch loop; wake-ups while it is busy fold into one.
func (r *Relay) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}
