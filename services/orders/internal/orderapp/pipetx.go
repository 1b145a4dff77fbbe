package orderapp

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pipeTx is the transaction a change runs in, on one connection, with fewer
// round trips than pgx.Tx: BEGIN and every Exec (a write whose only result
// is its error) are held and sent in one pipeline with the next statement
// that reads, or with COMMIT. A payment with an Idempotency-Key makes four
// round trips instead of eight:
//
//	BEGIN + lock the key  ·  look the key up  ·  insert the captured order  ·  store the key + insert the outbox row + COMMIT
//
// The statements run in the order they were issued, in one transaction, as
// before; only their results come back later. An error in a held statement
// surfaces at the statement that sends it (the server skips the rest of
// that pipeline) and the transaction is rolled back: nothing of it commits.
type pipeTx struct {
	conn   *pgx.Conn
	held   []heldStmt
	begun  bool // BEGIN has been sent
	closed bool // committed or rolled back
}

type heldStmt struct {
	sql  string
	args []any
}

// beginPipe starts a pipeTx on conn; BEGIN goes with its first statement.
func beginPipe(conn *pgx.Conn) *pipeTx {
	return &pipeTx{conn: conn, held: []heldStmt{{sql: "BEGIN"}}}
}

// Exec holds the statement until the next one that reads, or COMMIT. The
// command tag it returns is empty.
func (t *pipeTx) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.closed {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	t.held = append(t.held, heldStmt{sql: sql, args: args})
	return pgconn.CommandTag{}, nil
}

// QueryRow sends the held statements and this one in one round trip.
func (t *pipeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.closed {
		return errRow{pgx.ErrTxClosed}
	}
	br, err := t.send(ctx, sql, args)
	if err != nil {
		return errRow{err}
	}
	return pipeRow{row: br.QueryRow(), br: br}
}

// Query sends the held statements, then this one.
func (t *pipeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	if len(t.held) > 0 {
		br, err := t.send(ctx, "", nil)
		if err != nil {
			return nil, err
		}
		if err := br.Close(); err != nil {
			return nil, err
		}
	}
	return t.conn.Query(ctx, sql, args...)
}

// Commit sends the held statements and COMMIT in one round trip. When it
// fails, the transaction is still open or already ended on the server, and
// Rollback makes sure it is ended.
func (t *pipeTx) Commit(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	br, err := t.send(ctx, "COMMIT", nil)
	if err != nil {
		return err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
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
	t.closed, t.held = true, nil
	if !t.begun {
		return nil
	}
	_, err := t.conn.Exec(ctx, "ROLLBACK")
	return err
}

// send queues the held statements and then sql (unless it is empty) in one
// batch and reads the held statements' results; the returned results are at
// sql's.
func (t *pipeTx) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(t.held)+1)}
	for _, h := range t.held {
		b.Queue(h.sql, h.args...)
	}
	if sql != "" {
		b.Queue(sql, args...)
	}
	held := len(t.held)
	t.held = t.held[:0]
	t.begun = true
	br := t.conn.SendBatch(ctx, b)
	for i := range held {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, fmt.Errorf("%s: %w", statementName(b.QueuedQueries[i].SQL), err)
		}
	}
	return br, nil
}

// statementName is the start of a statement, to name it in an error.
func statementName(sql string) string {
	const n = 48
	if len(sql) > n {
		return sql[:n] + "…"
	}
	return sql
}

// pipeRow is the row of a QueryRow sent in a batch; Scan ends the batch.
type pipeRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r pipeRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
