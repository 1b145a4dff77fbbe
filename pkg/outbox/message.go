package outbox

import (
	"strconv"
	"time"

	"github.com/IBM/sarama"
)

// CloudEvents 1.0 Kafka protocol binding, binary mode: the event's attributes
// are Kafka headers named ce_<attribute>; the message value is the data.
// docs/events.md is the contract.
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
// "/paylab/orders"; ce_sequence only for an ordered event), e.Headers (such as traceparent) copied after them.
func (e *Event) ProducerMessage(source string) *sarama.ProducerMessage {
	headers := make([]sarama.RecordHeader, 0, 10+len(e.Headers))
	add := func(k, v string) { headers = append(headers, sarama.RecordHeader{Key: []byte(k), Value: []byte(v)}) }
	add(HeaderSpecVersion, SpecVersion)
	add(HeaderID, e.ID.String())
	add(HeaderSource, source)
	add(HeaderType, e.Type)
	add(HeaderTime, e.OccurredAt.UTC().Format(time.RFC3339Nano))
	add(HeaderSubject, e.AggregateID)
	if e.Sequence > 0 { // 0: unordered, no ce_sequence (see Event.Sequence)
		add(HeaderSequence, strconv.FormatInt(e.Sequence, 10))
	}
	add(HeaderSchemaVersion, strconv.Itoa(max(e.SchemaVersion, 1)))
	add(HeaderAggregateType, e.AggregateType)
	add(HeaderContentType, ContentTypeJSON)
	for k, v := range e.Headers {
		add(k, v)
	}
	return &sarama.ProducerMessage{
		Topic:   e.Topic,
		Key:     sarama.StringEncoder(e.AggregateID),
		Value:   sarama.ByteEncoder(e.Payload),
		Headers: headers,
	}
}
