package inbox

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// databaseGone reports whether err means the database could not be reached
// or went away: a server shutting down or crashing (57P01-03), a connection
// exception (class 08), a member that no longer takes writes (25006,
// read-only: demoted by a failover), a connection that could not be made,
// or — connLost, the handler's transaction lost its connection — a network
// error or an unexpected end of the stream. A network error while the
// transaction's connection lives is the handler's own (an SMTP server
// unreachable) and fails like any other, as does the handler's timeout.
func databaseGone(err error, connLost bool) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var (
		pgErr      *pgconn.PgError
		connectErr *pgconn.ConnectError
		netErr     net.Error
	)
	switch {
	case errors.As(err, &pgErr):
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P") || pgErr.Code == "25006"
	case errors.As(err, &connectErr):
		return true
	case errors.As(err, &netErr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return connLost
	}
	return connLost && pgconn.SafeToRetry(err)
}

// connLost reports whether tx's connection is closed: pgconn closes it when
// a read or write on it fails.
func connLost(tx pgx.Tx) bool {
	if tx == nil || tx.Conn() == nil {
		return false
	}
	return tx.Conn().PgConn().IsClosed()
}
