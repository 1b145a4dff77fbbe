package pgpipe

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Tx is a transaction on one connection with fewer round trips than pgx.Tx:
// BEGIN travels with its first statement, and its held writes with COMMIT.
// An error in a held statement surfaces at the statement that sends it, and
// the transaction must then be rolled back: nothing of it commits.
type Tx struct {
	conn   *pgx.Conn
	w      *Writes
	closed bool // committed or rolled back
}

// Begin starts a Tx on conn; nothing is sent yet.
func Begin(conn *pgx.Conn) *Tx {
	return &Tx{conn: conn, w: New(conn, "BEGIN")}
}

// Exec holds the statement (Writes.Exec); the command tag is empty.
func (t *Tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.closed {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	return t.w.Exec(ctx, sql, args...)
}

// QueueRow holds a read (Writes.QueueRow).
func (t *Tx) QueueRow(sql string, args []any, scan func(pgx.Row) error) {
	t.w.QueueRow(sql, args, scan)
}

// QueryRow sends the held statements and this one in one round trip.
func (t *Tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.closed {
		return errRow{pgx.ErrTxClosed}
	}
	return t.w.QueryRow(ctx, sql, args...)
}

// Query sends the held statements, then this one.
func (t *Tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	return t.w.Query(ctx, sql, args...)
}

// Commit sends the held statements and COMMIT in one round trip. When it
// fails, Rollback makes sure the transaction has ended.
func (t *Tx) Commit(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	tag, err := t.w.Finish(ctx, "COMMIT")
	if err != nil {
		return err
	}
	t.closed = true
	if tag.String() != "COMMIT" {
		// The server answers COMMIT of a failed transaction with ROLLBACK.
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// Rollback ends the transaction if it has begun on the server; held
// statements are dropped unsent. It returns pgx.ErrTxClosed after Commit.
func (t *Tx) Rollback(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	t.w.Drop()
	if !t.w.Sent() {
		return nil
	}
	_, err := t.conn.Exec(ctx, "ROLLBACK")
	return err
}
