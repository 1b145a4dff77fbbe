package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
)

// Header names that differ per message. Everything else in the payload file
// is sent as it is.
const (
	headerID      = "ce_id"      // the message's own id (its Watermill UUID)
	headerSubject = "ce_subject" // the order id, and so the Kafka key
)

// payload is the event every contender of the bench sends: the Kafka
// value's bytes and the record's headers.
type payload struct {
	Value   []byte
	Headers map[string]string
}

// readPayload reads the bench's payload file: {"value": <the event's JSON>,
// "headers": {name: value, …}}. The value's bytes are sent as they are in
// the file, spacing included, so every contender sends the same bytes.
func readPayload(path string) (payload, error) {
	if path == "" {
		return payload{}, errors.New("no -payload-file")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return payload{}, err
	}
	var f struct {
		Value   json.RawMessage   `json:"value"`
		Headers map[string]string `json:"headers"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return payload{}, fmt.Errorf("reading payload file %s: %w", path, err)
	}
	if len(f.Value) == 0 {
		return payload{}, fmt.Errorf("payload file %s: no value", path)
	}
	return payload{Value: f.Value, Headers: f.Headers}, nil
}

// message builds the Watermill message of an event about orderID: the
// payload's value and headers, with ce_id its own UUID and ce_subject the
// order id, as paylab's relay sets them. The Kafka marshaler keys it by
// ce_subject (partitionKey).
func (p payload) message(ctx context.Context, orderID string) *message.Message {
	msg := message.NewMessage(watermill.NewUUID(), p.Value)
	msg.Metadata = make(message.Metadata, len(p.Headers)+2)
	maps.Copy(msg.Metadata, p.Headers)
	msg.Metadata.Set(headerID, msg.UUID)
	msg.Metadata.Set(headerSubject, orderID)
	msg.SetContext(ctx)
	return msg
}

// partitionKey is the Kafka key of a message: its order id.
func partitionKey(_ string, msg *message.Message) (string, error) {
	key := msg.Metadata.Get(headerSubject)
	if key == "" {
		return "", fmt.Errorf("message %s has no %s", msg.UUID, headerSubject)
	}
	return key, nil
}
