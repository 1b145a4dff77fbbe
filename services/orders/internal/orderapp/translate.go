package orderapp

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paylab/paylab/services/orders/internal/order"
)

// PostgreSQL error codes this service gives a meaning to.
const (
	pgUniqueViolation = "23505"
	pgCheckViolation  = "23514"
)

// translate turns PostgreSQL errors into the application's errors, in one
// place. Errors without a meaning here pass through unchanged.
func translate(err error) error {
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
