package reconcile

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// maxListedIDs is how many pending rows' ids a Backlog lists.
const maxListedIDs = 10

// Backlog is what the orders database's outbox has yet to publish: its
// pending rows, neither dispatched nor parked. Once the pipeline has
// settled there must be none: a row left pending is an event never
// published, or published without the relay recording it (it would go out
// again). In the naive modes the API writes no outbox rows, so there are
// none either.
type Backlog struct {
	Pending int `json:"pending"`
	// Held counts the pending rows leased into the future: a relay is
	// publishing them, or they wait out a retry backoff.
	Held   int       `json:"held"`
	IDs    []int64   `json:"ids,omitempty"`   // the oldest pending rows' ids, up to maxListedIDs
	Oldest time.Time `json:"oldest,omitzero"` // when the oldest pending row was inserted
	// HighWater is the largest id in the outbox: rows inserted later have
	// larger ones.
	HighWater int64 `json:"high_water"`
	// ReaderAwaited: the WAL relays' slot has no reader — its lease expired
	// or was released — so the rows wait for a standby to take it over.
	ReaderAwaited bool `json:"reader_awaited,omitempty"`

	rows []pendingRow // every pending row, in id order
}

// pendingRow is one pending row, as Settle compares reads: a row retried
// (attempts) or leased again is one that moved.
type pendingRow struct {
	id       int64
	inserted time.Time
	attempts int32
	held     bool
}

// newBacklog summarizes rows, which are in id order.
func newBacklog(rows []pendingRow, highWater int64) Backlog {
	b := Backlog{Pending: len(rows), HighWater: highWater, rows: rows}
	for i, p := range rows {
		if p.held {
			b.Held++
		}
		if i < maxListedIDs {
			b.IDs = append(b.IDs, p.id)
		}
		if b.Oldest.IsZero() || p.inserted.Before(b.Oldest) {
			b.Oldest = p.inserted
		}
	}
	return b
}

// moving reports whether the pending rows will still move without anyone's
// help: a relay holds some of them, or a WAL relay is about to take the
// slot over.
func (b Backlog) moving() bool {
	return b.Held > 0 || b.Pending > 0 && b.ReaderAwaited
}

// after keeps the rows inserted after a state whose high-water mark was
// highWater.
func (b Backlog) after(highWater int64) Backlog {
	i := 0
	for i < len(b.rows) && b.rows[i].id <= highWater {
		i++
	}
	if i == 0 {
		return b
	}
	out := newBacklog(b.rows[i:], b.HighWater)
	out.ReaderAwaited = b.ReaderAwaited
	return out
}

// describe says what is left pending, ids and age included; "" for nothing.
func (b Backlog) describe(settled bool) string {
	if b.Pending == 0 {
		return ""
	}
	ids := make([]string, len(b.IDs))
	for i, id := range b.IDs {
		ids[i] = fmt.Sprint(id)
	}
	list := strings.Join(ids, ", ")
	if more := b.Pending - len(b.IDs); more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	noun := "rows"
	if b.Pending == 1 {
		noun = "row"
	}
	when := "after the pipeline settled"
	if !settled {
		why := fmt.Sprintf("%d held by a relay or waiting out a retry backoff", b.Held)
		if b.ReaderAwaited {
			why += ", the WAL slot without a reader"
		}
		when = fmt.Sprintf("when settling gave up (%s)", why)
	}
	return fmt.Sprintf("%d outbox %s left pending %s: ids %s, oldest inserted %s",
		b.Pending, noun, when, list, b.Oldest.UTC().Format(time.RFC3339Nano))
}

// readBacklog reads the outbox's pending rows, its high-water mark and
// whether a WAL slot awaits a reader, in one snapshot.
func readBacklog(ctx context.Context, dbURL string) (Backlog, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return Backlog{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var (
		highWater int64
		awaited   bool
		rows      []pendingRow
	)
	err = pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `
			SELECT (SELECT coalesce(max(id), 0) FROM outbox),
			       EXISTS (SELECT FROM outbox_wal_readers WHERE owner IS NULL OR leased_until IS NULL OR leased_until <= now())`,
		).Scan(&highWater, &awaited); err != nil {
			return err
		}
		res, _ := tx.Query(ctx, `
			SELECT id, created_at, attempts, coalesce(leased_until > now(), false)
			FROM outbox WHERE dispatched_at IS NULL AND parked_at IS NULL ORDER BY id`)
		rows, err = pgx.CollectRows(res, func(row pgx.CollectableRow) (p pendingRow, err error) {
			err = row.Scan(&p.id, &p.inserted, &p.attempts, &p.held)
			return p, err
		})
		return err
	})
	if err != nil {
		return Backlog{}, fmt.Errorf("reading the outbox: %w", err)
	}
	b := newBacklog(rows, highWater)
	b.ReaderAwaited = awaited
	return b, nil
}
