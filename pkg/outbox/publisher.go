package outbox

import (
	"context"
	"errors"
	"fmt"
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

// ErrPermanent marks publish errors that retrying cannot fix.
var ErrPermanent = errors.New("permanent publish failure")

// Permanent wraps err so that errors.Is(err, ErrPermanent) holds.
func Permanent(err error) error { return fmt.Errorf("%w: %w", ErrPermanent, err) }

// PublisherFunc adapts a function to the Publisher interface.
type PublisherFunc func(ctx context.Context, events []Event) []error

// Publish calls f.
func (f PublisherFunc) Publish(ctx context.Context, events []Event) []error { return f(ctx, events) }
