package inbox

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/paylab/paylab/pkg/inbox/internal/inboxdb"
)

// recordParams are the columns an event is recorded with (attempts and
// last error left zero).
func recordParams(msg Message) inboxdb.RecordFailedParams {
	headers, _ := json.Marshal(msg.Headers) // a map of strings always marshals
	var at *time.Time
	if !msg.Time.IsZero() {
		at = &msg.Time
	}
	payload := msg.Data
	if !json.Valid(payload) {
		payload, _ = json.Marshal(string(msg.Data)) // undecodable data is kept as a JSON string
	}
	return inboxdb.RecordFailedParams{
		EventID: msg.ID, EventType: msg.Type, Source: msg.Source, AggregateID: msg.Subject,
		Sequence: msg.Sequence, EventTime: at, Payload: payload, Headers: headers,
		Topic: msg.Topic, KafkaPartition: msg.Partition, KafkaOffset: msg.Offset,
	}
}

func failedParams(msg Message, attempts int, cause error) inboxdb.RecordFailedParams {
	r := recordParams(msg)
	r.Attempts = int32(attempts)
	if cause != nil {
		r.LastError = cause.Error()
	}
	return r
}

// messageFromRow rebuilds a Message from its inbox row.
func messageFromRow(row inboxdb.Inbox) Message {
	msg := Message{
		ID: row.EventID, Type: row.EventType, Source: row.Source, Subject: row.AggregateID,
		Sequence: row.Sequence, Data: row.Payload, Topic: row.Topic,
		Partition: row.KafkaPartition, Offset: row.KafkaOffset,
	}
	if row.EventTime != nil {
		msg.Time = *row.EventTime
	}
	_ = json.Unmarshal(row.Headers, &msg.Headers)
	if v, ok := msg.Headers[HeaderSchemaVersion]; ok {
		fmt.Sscan(v, &msg.SchemaVersion) //nolint:errcheck // validated when it was received
	}
	return msg
}
