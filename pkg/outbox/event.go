package outbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Event is one domain event to be published after the transaction that
// records it commits.
type Event struct {
	// ID is the event's unique id: the CloudEvents id on the wire and the key
	// of the consumers' inboxes. Zero means "assign a new UUIDv7".
	ID uuid.UUID
	// AggregateType and AggregateID name the entity the event is about, e.g.
	// "order" and the order id. The aggregate id is the Kafka message key, so
	// one aggregate's events share a partition.
	AggregateType string
	AggregateID   string
	// Type is the event type, e.g. "OrderCaptured" (the CloudEvents type).
	Type string
	// SchemaVersion is the version of the payload's schema; zero means 1.
	SchemaVersion int
	// Sequence is the event's position in its aggregate's history, the
	// contract shared with package inbox (ce_sequence on the wire):
	//   - 1, 2, 3, … with no gaps: ordered. The relay publishes an event only
	//     after the aggregate's earlier ones were acknowledged, and the inbox
	//     applies it only after them. (AggregateType, AggregateID, Sequence)
	//     is unique.
	//   - 0: unordered. Published as soon as claimed, without ce_sequence;
	//     the inbox applies it on arrival. It neither waits for nor holds
	//     back the aggregate's ordered events.
	// Negative is invalid.
	Sequence int64
	// Topic is the Kafka topic the event is published to.
	Topic string
	// Payload is the event's JSON data.
	Payload json.RawMessage
	// Headers travel with the event, e.g. the W3C "traceparent" of the request
	// that caused it.
	Headers map[string]string
	// OccurredAt is when the change happened; zero means now.
	OccurredAt time.Time
}

// Errors returned by Enqueue for events that cannot be stored.
var ErrInvalidEvent = errors.New("outbox: invalid event")

// normalize fills in defaults and checks the required fields.
func (e *Event) normalize(now time.Time) error {
	if e.ID == uuid.Nil {
		id, err := uuid.NewV7()
		if err != nil {
			return fmt.Errorf("outbox: generating event id: %w", err)
		}
		e.ID = id
	}
	if e.SchemaVersion == 0 {
		e.SchemaVersion = 1
	}
	if e.OccurredAt.IsZero() {
		e.OccurredAt = now
	}
	switch {
	case e.AggregateType == "":
		return fmt.Errorf("%w: aggregate type is empty", ErrInvalidEvent)
	case e.AggregateID == "":
		return fmt.Errorf("%w: aggregate id is empty", ErrInvalidEvent)
	case e.Type == "":
		return fmt.Errorf("%w: type is empty", ErrInvalidEvent)
	case e.Topic == "":
		return fmt.Errorf("%w: topic is empty", ErrInvalidEvent)
	case e.Sequence < 0:
		return fmt.Errorf("%w: sequence %d is negative", ErrInvalidEvent, e.Sequence)
	case e.SchemaVersion < 1:
		return fmt.Errorf("%w: schema version %d is not positive", ErrInvalidEvent, e.SchemaVersion)
	case !json.Valid(e.Payload):
		return fmt.Errorf("%w: payload of %s %s is not valid JSON", ErrInvalidEvent, e.Type, e.ID)
	}
	return nil
}
