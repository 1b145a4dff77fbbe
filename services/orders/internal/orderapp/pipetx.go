package orderapp

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paylab/paylab/internal/platform/pgpipe"
)

// pipeTx is the transaction a change runs in, on one connection, with fewer
// round trips than pgx.Tx: BEGIN and every Exec (a write whose only result
// is its error) are held and sent in one pipeline with the next statement
// that reads, or with COMMIT (pgpipe). A payment with an Idempotency-Key
// makes three round trips instead of eight:
//
//	BEGIN + lock the key + look it up  ·  insert the captured order  ·  store the key + insert the outbox row + COMMIT
//
// An error in a held statement surfaces at the statement that sends it and
// the transaction is rolled back: nothing of it commits.
type pipeTx struct {
	conn   *pgx.Conn
	w      *pgpipe.Writes
	closed bool // committed or rolled back
}

// beginPipe starts a pipeTx on conn; BEGIN goes with its first statement.
func beginPipe(conn *pgx.Conn) *pipeTx {
	return &pipeTx{conn: conn, w: pgpipe.New(conn, "BEGIN")}
}

// Exec holds the statement; the command tag it returns is empty.
func (t *pipeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.closed {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	return t.w.Exec(ctx, sql, args...)
}

// QueryRow sends the held statements and this one in one round trip.
func (t *pipeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.closed {
		return errRow{pgx.ErrTxClosed}
	}
	return t.w.QueryRow(ctx, sql, args...)
}

// Query sends the held statements, then this one.
func (t *pipeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	return t.w.Query(ctx, sql, args...)
}

// Commit sends the held statements and COMMIT in one round trip. When it
// fails, Rollback makes sure the transaction has ended.
func (t *pipeTx) Commit(ctx context.Context) error {
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
func (t *pipeTx) Rollback(ctx context.Context) error {
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

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
