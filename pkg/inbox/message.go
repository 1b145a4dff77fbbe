package inbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
)

// CloudEvents 1.0 Kafka protocol binding, binary mode (as pkg/outbox writes it): the
// event's attributes travel as headers named ce_<attribute>, the value is the
// data. The names are repeated here so pkg/inbox stands on its own.
const (
	HeaderSpecVersion   = "ce_specversion"
	HeaderID            = "ce_id"
	HeaderSource        = "ce_source"
	HeaderType          = "ce_type"
	HeaderTime          = "ce_time"
	HeaderSubject       = "ce_subject"
	HeaderSequence      = "ce_sequence"
	HeaderSchemaVersion = "ce_schemaversion"
	HeaderContentType   = "content-type"
)

// ErrUndecodable marks a Kafka message that is not a CloudEvent this package
// can read: it is dead-lettered with reason "undecodable".
var ErrUndecodable = errors.New("inbox: undecodable message")

// Message is one consumed event.
type Message struct {
	ID      uuid.UUID // ce_id: the inbox key
	Type    string    // ce_type, selects the Handler
	Source  string    // ce_source
	Subject string    // ce_subject: the aggregate id (falls back to the message key)
	// Sequence is ce_sequence, the event's position in its aggregate's
	// history (the contract of outbox.Event.Sequence): 1, 2, 3, … with no
	// gaps, applied in that order per Subject; 0 when the header is absent:
	// unordered, applied on arrival. A present ce_sequence must be ≥ 1.
	Sequence      int64
	SchemaVersion int       // ce_schemaversion; 0 when absent
	Time          time.Time // ce_time; zero when absent
	Data          json.RawMessage
	Headers       map[string]string // every header as received

	Topic     string
	Partition int32
	Offset    int64
}

// Decode reads a CloudEvents binary-mode Kafka message. Only ce_id, ce_type
// and a JSON value are required; a present but malformed attribute is an
// error. Errors wrap ErrUndecodable; the Message is returned as far as it was
// read (its ID is set when ce_id was valid).
func Decode(m *sarama.ConsumerMessage) (Message, error) {
	msg := Message{
		Headers:   make(map[string]string, len(m.Headers)),
		Data:      json.RawMessage(m.Value),
		Topic:     m.Topic,
		Partition: m.Partition,
		Offset:    m.Offset,
		Subject:   string(m.Key),
	}
	for _, h := range m.Headers {
		if h != nil {
			msg.Headers[string(h.Key)] = string(h.Value)
		}
	}
	fail := func(format string, args ...any) (Message, error) {
		return msg, fmt.Errorf("%w: %s", ErrUndecodable, fmt.Sprintf(format, args...))
	}
	id, err := uuid.Parse(msg.Headers[HeaderID])
	if err != nil {
		return fail("header %s %q is not a UUID", HeaderID, msg.Headers[HeaderID])
	}
	msg.ID = id
	if v := msg.Headers[HeaderSpecVersion]; v != "" && v != "1.0" {
		return fail("unsupported CloudEvents spec version %q", v)
	}
	if msg.Type = msg.Headers[HeaderType]; msg.Type == "" {
		return fail("header %s is missing", HeaderType)
	}
	msg.Source = msg.Headers[HeaderSource]
	if s := msg.Headers[HeaderSubject]; s != "" {
		msg.Subject = s
	}
	if s := msg.Headers[HeaderSequence]; s != "" {
		if msg.Sequence, err = strconv.ParseInt(s, 10, 64); err != nil || msg.Sequence < 1 {
			return fail("header %s %q is not a positive integer", HeaderSequence, s)
		}
		if msg.Subject == "" {
			return fail("a sequenced event needs %s or a message key", HeaderSubject)
		}
	}
	if s := msg.Headers[HeaderSchemaVersion]; s != "" {
		if msg.SchemaVersion, err = strconv.Atoi(s); err != nil {
			return fail("header %s %q is not an integer", HeaderSchemaVersion, s)
		}
	}
	if s := msg.Headers[HeaderTime]; s != "" {
		if msg.Time, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return fail("header %s %q is not RFC 3339", HeaderTime, s)
		}
	}
	if ct := msg.Headers[HeaderContentType]; ct != "" && ct != "application/json" {
		return fail("content type %q is not application/json", ct)
	}
	if !json.Valid(m.Value) {
		return fail("value is not JSON")
	}
	return msg, nil
}
