package orderapp

import (
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paylab/paylab/services/orders/internal/order"
)

// PostgreSQL error codes this service gives a meaning to.
const (
	pgUniqueViolation = "23505"
	pgCheckViolation  = "23514"
	// pgReadOnlyTransaction: the server is a replica, as the old leader is
	// for a moment after a switchover; the new leader takes the retry.
	pgReadOnlyTransaction = "25006"
)

// translate turns PostgreSQL errors into the application's errors, in one
// place. Errors without a meaning here pass through unchanged.
func translate(err error) error {
	if err == nil || errors.Is(err, order.ErrUnavailable) {
		return err
	}
	if unavailable(err) {
		return errors.Join(order.ErrUnavailable, err)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch {
	case pgErr.Code == pgUniqueViolation && pgErr.ConstraintName == "idempotency_keys_pkey":
		// Another transaction stored the key between our lock and insert;
		// the advisory lock makes this unreachable, but it means the same.
		return errors.Join(order.ErrIdempotencyKeyInFlight, err)
	case pgErr.Code == pgCheckViolation && pgErr.ConstraintName == "orders_check1":
		// refunded_amount BETWEEN 0 AND captured_amount: the guarded UPDATE
		// keeps this from happening; keep the meaning if it ever does.
		return errors.Join(order.ErrRefundTooLarge, err)
	}
	return err
}

// unavailable reports whether err means the database could not be reached or
// is going away (restart, shutdown, connection lost, failover: no leader, or
// a member that no longer takes writes), as opposed to a statement it
// refused. Serialization failures and deadlocks (40001, 40P01) are not: the
// database is there, and the statement failed on its own.
func unavailable(err error) bool {
	var (
		pgErr      *pgconn.PgError
		connectErr *pgconn.ConnectError
		netErr     net.Error
	)
	switch {
	case errors.As(err, &pgErr):
		// Class 08: connection exception; 57P01-03: admin shutdown, crash
		// shutdown, cannot connect now; 53300: too many connections.
		// 25006: read-only transaction, a member demoted under the pool.
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P") ||
			pgErr.Code == "53300" || pgErr.Code == pgReadOnlyTransaction
	case errors.As(err, &connectErr), errors.As(err, &netErr):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return true
	}
	return pgconn.SafeToRetry(err)
}
