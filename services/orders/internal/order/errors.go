package order

import (
	"errors"
	"strings"
)

// Errors of the orders application. The HTTP layer maps each to a status and
// a stable problem code, in one place.
var (
	ErrNotFound       = errors.New("order not found")
	ErrNotCapturable  = errors.New("order is not authorized, so it cannot be captured")
	ErrNotRefundable  = errors.New("order is not captured, so it cannot be refunded")
	ErrRefundTooLarge = errors.New("refund exceeds the captured amount not yet refunded")

	// ErrIdempotencyKeyInFlight: a request with the same key is still running.
	ErrIdempotencyKeyInFlight = errors.New("a request with this idempotency key is in flight")
	// ErrIdempotencyKeyReused: the key was used before for a different request.
	ErrIdempotencyKeyReused = errors.New("idempotency key was used for a different request")

	// ErrPublish: naive mode could not publish an event to Kafka.
	ErrPublish = errors.New("publishing event")

	// ErrUnavailable: the database could not be reached or is restarting;
	// nothing was committed, and the request can be retried.
	ErrUnavailable = errors.New("database unavailable")
)

// FieldError is one invalid field of a request.
type FieldError struct {
	Field   string // the field's name on the wire, e.g. "amount"
	Code    string // stable machine-readable code, e.g. "amount_invalid"
	Message string
}

// ValidationError lists the invalid fields of a request, in a fixed order.
type ValidationError struct {
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		msgs[i] = f.Field + " " + f.Message
	}
	return "invalid request: " + strings.Join(msgs, "; ")
}

// invalid adds a field error, each field at most once.
func (e *ValidationError) invalid(field, message string) {
	for _, f := range e.Fields {
		if f.Field == field {
			return
		}
	}
	e.Fields = append(e.Fields, FieldError{Field: field, Code: field + "_invalid", Message: message})
}

func (e *ValidationError) orNil() error {
	if len(e.Fields) == 0 {
		return nil
	}
	return e
}
