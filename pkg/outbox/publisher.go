package outbox

import (
	"context"
	"errors"
)

// Publisher sends a batch of events to the broker and waits for the
// broker's acknowledgements. The relay depends only on this interface;
// KafkaPublisher is the Kafka (sarama) implementation.
//
// Publish returns nil when every event was acknowledged, otherwise a slice
// with one entry per event: nil for an acknowledged event, the error for one
// that was not. An event must never be reported as acknowledged unless the
// broker acknowledged it. Errors wrapping ErrPermanent mean retrying cannot
// help (the message is too large, say): the relay parks those events.
type Publisher interface {
	Publish(ctx context.Context, events []Event) []error
}

// ErrPermanent is what every error made by Permanent is (errors.Is): a
// publish failure that retrying cannot fix.
var ErrPermanent = errors.New("permanent publish failure")

type permanentError struct{ err error }

func (e permanentError) Error() string        { return ErrPermanent.Error() + ": " + e.err.Error() }
func (e permanentError) Unwrap() error        { return e.err }
func (e permanentError) Is(target error) bool { return target == ErrPermanent }

// Permanent wraps a publish error that retrying cannot fix (a message too
// large, say): the relay parks the event at once. The result is
// ErrPermanent (errors.Is) and still wraps err; Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err is, or wraps, ErrPermanent.
func IsPermanent(err error) bool { return errors.Is(err, ErrPermanent) }

// PublisherFunc adapts a function to the Publisher interface.
type PublisherFunc func(ctx context.Context, events []Event) []error

// Publish calls f.
func (f PublisherFunc) Publish(ctx context.Context, events []Event) []error { return f(ctx, events) }
