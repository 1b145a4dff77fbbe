package outbox

import (
	"strconv"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
)

// CloudEvents 1.0 Kafka protocol binding, binary mode: the event's attributes
// are Kafka headers named ce_<attribute>; the message value is the data.
// pkg/inbox reads the same headers.
const (
	HeaderSpecVersion   = "ce_specversion"
	HeaderID            = "ce_id"
	HeaderSource        = "ce_source"
	HeaderType          = "ce_type"
	HeaderTime          = "ce_time"
	HeaderSubject       = "ce_subject"
	HeaderSequence      = "ce_sequence"
	HeaderSchemaVersion = "ce_schemaversion"
	HeaderAggregateType = "ce_aggregatetype"
	HeaderContentType   = "content-type"

	SpecVersion     = "1.0"
	ContentTypeJSON = "application/json"
)

// ProducerMessage encodes e as a Kafka message: key = aggregate id, CloudEvents
// attributes as headers (source names the producing service, e.g.
// "/shop/carts"; ce_sequence only for an ordered event), e.Headers (such as traceparent) copied after them.
func (e *Event) ProducerMessage(source string) *sarama.ProducerMessage {
	return &producerMessages([]Event{*e}, source)[0]
}

// producerMessages builds events' messages in a few allocations for the
// whole batch instead of several per message: the messages, their keys and
// values, their headers and the headers' bytes each share one slice. The
// key is the aggregate id's bytes, so the partition is the one its string
// would give.
func producerMessages(events []Event, source string) []sarama.ProducerMessage {
	msgs := make([]sarama.ProducerMessage, len(events))
	encoders := make([]sarama.ByteEncoder, 2*len(events)) // key, value
	headers, size := 0, 0
	for i := range events {
		headers += events[i].headerCount()
		size += events[i].recordBytes(source)
	}
	w := recordWriter{headers: make([]sarama.RecordHeader, 0, headers), buf: make([]byte, 0, size)}
	for i := range events {
		e := &events[i]
		first := len(w.headers)
		w.writeHeaders(e, source)
		key, value := &encoders[2*i], &encoders[2*i+1]
		*key, *value = w.bytes(e.AggregateID), sarama.ByteEncoder(e.Payload)
		msgs[i] = sarama.ProducerMessage{
			Topic:   e.Topic,
			Key:     key,
			Value:   value,
			Headers: w.headers[first:len(w.headers):len(w.headers)],
		}
	}
	return msgs
}

// recordWriter builds messages' headers into shared buffers: a relay
// encodes one message per event, and allocations per header or per value
// (uuid and time strings, numbers) were a large part of its CPU. Every key
// and value is a slice of buf capped at its end, so later appends (even
// into a grown buf) never overwrite it.
type recordWriter struct {
	headers []sarama.RecordHeader
	buf     []byte
}

// headerCount is how many headers e's message has at most.
func (e *Event) headerCount() int { return 10 + len(e.Headers) }

// recordBytes is about how many bytes e's headers take (a time far from
// now may take a few more), plus its key.
func (e *Event) recordBytes(source string) int {
	n := len(HeaderSpecVersion) + len(SpecVersion) + len(HeaderID) + 36 + len(HeaderSource) + len(source) +
		len(HeaderType) + len(e.Type) + len(HeaderTime) + len("2006-01-02T15:04:05.999999999Z") +
		len(HeaderSubject) + len(e.AggregateID) + len(HeaderSequence) + 20 + len(HeaderSchemaVersion) + 11 +
		len(HeaderAggregateType) + len(e.AggregateType) + len(HeaderContentType) + len(ContentTypeJSON) +
		len(e.AggregateID)
	for k, v := range e.Headers {
		n += len(k) + len(v)
	}
	return n
}

// cut returns buf[start:], capped.
func (w *recordWriter) cut(start int) []byte { return w.buf[start:len(w.buf):len(w.buf)] }

// bytes copies s into buf.
func (w *recordWriter) bytes(s string) []byte {
	start := len(w.buf)
	w.buf = append(w.buf, s...)
	return w.cut(start)
}

func (w *recordWriter) header(key string, value []byte) {
	w.headers = append(w.headers, sarama.RecordHeader{Key: w.bytes(key), Value: value})
}

// writeHeaders appends e's headers.
func (w *recordWriter) writeHeaders(e *Event, source string) {
	w.header(HeaderSpecVersion, w.bytes(SpecVersion))
	start := len(w.buf)
	w.buf = appendUUID(w.buf, e.ID)
	w.header(HeaderID, w.cut(start))
	w.header(HeaderSource, w.bytes(source))
	w.header(HeaderType, w.bytes(e.Type))
	start = len(w.buf)
	w.buf = e.OccurredAt.UTC().AppendFormat(w.buf, time.RFC3339Nano)
	w.header(HeaderTime, w.cut(start))
	w.header(HeaderSubject, w.bytes(e.AggregateID))
	if e.Sequence > 0 { // 0: unordered, no ce_sequence (see Event.Sequence)
		start = len(w.buf)
		w.buf = strconv.AppendInt(w.buf, e.Sequence, 10)
		w.header(HeaderSequence, w.cut(start))
	}
	start = len(w.buf)
	w.buf = strconv.AppendInt(w.buf, int64(max(e.SchemaVersion, 1)), 10)
	w.header(HeaderSchemaVersion, w.cut(start))
	w.header(HeaderAggregateType, w.bytes(e.AggregateType))
	w.header(HeaderContentType, w.bytes(ContentTypeJSON))
	for k, v := range e.Headers {
		w.header(k, w.bytes(v))
	}
}

// appendUUID appends u in its canonical form, as u.String() returns it.
func appendUUID(b []byte, u uuid.UUID) []byte {
	const digits = "0123456789abcdef"
	for i, x := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, digits[x>>4], digits[x&0x0f])
	}
	return b
}
