package inbox

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// Errors of this package.
var (
	// ErrNotFailed is returned by Redrive for an event that is not in the
	// inbox with status failed.
	ErrNotFailed = errors.New("inbox: event is not failed")
	// ErrUnknownType marks an event type without a handler.
	ErrUnknownType = errors.New("inbox: no handler for event type")
	// ErrPermanent is what every error made by Permanent is (errors.Is).
	ErrPermanent = errors.New("inbox: permanent failure")
)

// Reasons a message is dead-lettered (the dlq_reason header; a metric label).
const (
	ReasonUndecodable   = "undecodable"
	ReasonUnknownType   = "unknown_type"
	ReasonRejected      = "rejected"       // the handler returned Permanent
	ReasonHandlerFailed = "handler_failed" // attempts exhausted
)

type permanentError struct{ err error }

func (e permanentError) Error() string        { return e.err.Error() }
func (e permanentError) Unwrap() error        { return e.err }
func (e permanentError) Is(target error) bool { return target == ErrPermanent }

// Permanent wraps a handler error that retrying cannot fix (say, a payload
// that does not parse): the event is dead-lettered at once. The result is
// ErrPermanent (errors.Is) and still wraps err; Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err is, or wraps, ErrPermanent.
func IsPermanent(err error) bool { return errors.Is(err, ErrPermanent) }

// handlerError marks an error returned by a handler, as opposed to a failure
// of the inbox's own database work (which is retried without limit: a
// database outage is not a poison message).
type handlerError struct {
	reason string
	err    error
}

func (e *handlerError) Error() string { return fmt.Sprintf("%s: %v", e.reason, e.err) }
func (e *handlerError) Unwrap() error { return e.err }

// transient reports a PostgreSQL error that retrying the same transaction
// resolves: a serialization failure (40001) or a deadlock (40P01), or the
// database going away under the handler (databaseGone; connLost: the
// handler's transaction lost its connection). A handler failing with one is
// retried without using up its attempts: a failover of the database is not
// a poison message.
func transient(err error, connLost bool) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01") {
		return true
	}
	return databaseGone(err, connLost)
}
