package inbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/pkg/inbox/internal/inboxdb"
)

// Redrive re-processes an event with inbox status failed, once, with cfg's
// Handlers (Kafka settings are not used). Its ordering rules hold: an event
// that is next in its aggregate's sequence is applied, and so are the
// aggregate's events parked behind it; otherwise it is parked (Outcome
// Parked). If the handler fails again the event stays failed and the error is
// returned. An event that is not failed gives ErrNotFailed.
func Redrive(ctx context.Context, pool *pgxpool.Pool, cfg Config, eventID uuid.UUID) (Outcome, error) {
	if err := cfg.validateOptional(); err != nil {
		return "", err
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer, cfg.MetricPrefix, handlerTypes(cfg.Handlers))
	if err != nil {
		return "", fmt.Errorf("inbox: registering metrics: %w", err)
	}
	e := newEngine(pool, cfg, m)

	var row inboxdb.Inbox
	err = withTx(ctx, pool, func(tx pgx.Tx) error {
		q := e.queries(tx)
		n, err := q.ResetFailed(ctx, eventID)
		if err != nil {
			return fmt.Errorf("resetting event %s: %w", eventID, err)
		}
		if n == 0 {
			return fmt.Errorf("%w: %s", ErrNotFailed, eventID)
		}
		if row, err = q.Lock(ctx, eventID); err != nil {
			return fmt.Errorf("reading event %s: %w", eventID, err)
		}
		if row.Sequence > 0 {
			return nil
		}
		// An unordered event is applied right here.
		msg := messageFromRow(row)
		if _, ok := cfg.Handlers[msg.Type]; !ok {
			return unknownType(msg)
		}
		return e.apply(ctx, q, tx, msg)
	})
	var herr *handlerError
	if errors.As(err, &herr) {
		if err := e.queries(pool).MarkFailed(ctx, inboxdb.MarkFailedParams{EventID: eventID, LastError: ptr(herr.Error())}); err != nil {
			return "", errors.Join(herr, fmt.Errorf("marking %s failed again: %w", eventID, err))
		}
		return "", herr
	}
	if err != nil {
		return "", err
	}
	if row.Sequence > 0 {
		if err := e.drain(ctx, row.AggregateID); err != nil {
			return "", err
		}
	}
	status, err := e.queries(pool).Status(ctx, eventID)
	if err != nil {
		return "", fmt.Errorf("reading status of %s: %w", eventID, err)
	}
	switch status {
	case "processed":
		return Processed, nil
	case "received":
		return Parked, nil
	}
	return "", fmt.Errorf("event %s is %s after the re-drive", eventID, status)
}
