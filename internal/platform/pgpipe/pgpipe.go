// Package pgpipe saves a transaction's round trips: the writes that return
// nothing (Exec), and reads queued with QueueRow, are held and sent in one
// pgx pipeline with the next statement that reads, or with a final
// statement such as COMMIT. The statements still run in the order they were
// issued, in the same transaction; only their results come back later. An error in a held
// statement surfaces at the statement that sends it (the server skips the
// rest of that pipeline), and the caller rolls the transaction back.
//
// Tx is such a transaction on one connection, its BEGIN sent with its first
// statement and its held writes with its COMMIT.
//
// Exec returns an empty command tag: hold only statements whose tag the
// caller ignores (sqlc's :exec queries).
package pgpipe

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Sender is what Writes sends on: a *pgx.Conn or a pgx.Tx.
type Sender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Writes holds Execs for db. It is not safe for concurrent use, nor is the
// connection under it.
type Writes struct {
	db   Sender
	held []stmt
	sent bool
}

type stmt struct {
	sql  string
	args []any
	scan func(pgx.Row) error // a held read's, or nil
}

// New returns Writes on db that already hold the given statements (e.g.
// "BEGIN", sent with the first statement that reads).
func New(db Sender, held ...string) *Writes {
	w := &Writes{db: db, held: make([]stmt, 0, 8)}
	for _, sql := range held {
		w.held = append(w.held, stmt{sql: sql})
	}
	return w
}

// Exec holds the statement until the next one that reads, Flush or Finish.
func (w *Writes) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	w.held = append(w.held, stmt{sql: sql, args: args})
	return pgconn.CommandTag{}, nil
}

// QueueRow holds a read: it is sent with the next statement that is sent,
// and scan gets its row then (before that statement's result is read). An
// error of scan's surfaces there too.
func (w *Writes) QueueRow(sql string, args []any, scan func(pgx.Row) error) {
	w.held = append(w.held, stmt{sql: sql, args: args, scan: scan})
}

// QueryRow sends the held statements and this one in one round trip.
func (w *Writes) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	br, err := w.send(ctx, sql, args)
	if err != nil {
		return errRow{err}
	}
	return batchRow{row: br.QueryRow(), br: br}
}

// Query sends the held statements, then this one.
func (w *Writes) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := w.Flush(ctx); err != nil {
		return nil, err
	}
	w.sent = true
	return w.db.Query(ctx, sql, args...)
}

// Flush sends the held statements, if any.
func (w *Writes) Flush(ctx context.Context) error {
	if len(w.held) == 0 {
		return nil
	}
	br, err := w.send(ctx, "", nil)
	if err != nil {
		return err
	}
	return br.Close()
}

// Finish sends the held statements and sql in one round trip and returns
// sql's command tag.
func (w *Writes) Finish(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br, err := w.send(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// Drop forgets the held statements unsent.
func (w *Writes) Drop() { w.held = w.held[:0] }

// Sent reports whether anything has been sent.
func (w *Writes) Sent() bool { return w.sent }

// send queues the held statements and then sql (unless it is empty) in one
// batch and reads the held statements' results; the returned results are at
// sql's.
func (w *Writes) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(w.held)+1)}
	for _, h := range w.held {
		b.Queue(h.sql, h.args...)
	}
	if sql != "" {
		b.Queue(sql, args...)
	}
	held := w.held
	w.held, w.sent = nil, true
	defer func() { w.held = held[:0] }()
	br := w.db.SendBatch(ctx, b)
	for i, h := range held {
		var err error
		if h.scan != nil {
			err = h.scan(br.QueryRow())
		} else {
			_, err = br.Exec()
		}
		if err != nil {
			_ = br.Close()
			return nil, fmt.Errorf("%s: %w", name(b.QueuedQueries[i].SQL), err)
		}
	}
	return br, nil
}

// name is the start of a statement, to name it in an error (sqlc's start
// with "-- name: Query").
func name(sql string) string {
	const n = 48
	if len(sql) > n {
		return sql[:n] + "…"
	}
	return sql
}

// batchRow is the row of a QueryRow sent in a batch; Scan ends the batch.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
