package inbox_test

import (
	"errors"
	"testing"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/paylab/paylab/pkg/inbox"
)

func TestDecode(t *testing.T) {
	t.Parallel()
	id := uuid.Must(uuid.NewV7())
	valid := func() map[string]string {
		return map[string]string{
			"ce_specversion": "1.0", "ce_id": id.String(), "ce_source": "/paylab/orders", "ce_type": "OrderCaptured",
			"ce_time": "2026-12-02T12:00:00.123456Z", "ce_subject": "ord-1", "ce_sequence": "3",
			"ce_schemaversion": "1", "content-type": "application/json", "traceparent": "00-abc-def-01",
		}
	}
	msg := func(h map[string]string, value string) *sarama.ConsumerMessage {
		m := &sarama.ConsumerMessage{Topic: "t", Partition: 2, Offset: 7, Key: []byte("key-1"), Value: []byte(value)}
		for k, v := range h {
			m.Headers = append(m.Headers, &sarama.RecordHeader{Key: []byte(k), Value: []byte(v)})
		}
		return m
	}

	got, err := inbox.Decode(msg(valid(), `{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != id || got.Type != "OrderCaptured" || got.Subject != "ord-1" || got.Sequence != 3 || got.SchemaVersion != 1 ||
		got.Time.IsZero() || got.Headers["traceparent"] != "00-abc-def-01" || got.Partition != 2 || got.Offset != 7 {
		t.Errorf("decoded %+v", got)
	}

	for _, tc := range []struct {
		name  string
		mut   func(map[string]string)
		value string
	}{
		{name: "no id", mut: func(h map[string]string) { delete(h, "ce_id") }},
		{name: "id not a uuid", mut: func(h map[string]string) { h["ce_id"] = "42" }},
		{name: "no type", mut: func(h map[string]string) { delete(h, "ce_type") }},
		{name: "spec version 0.3", mut: func(h map[string]string) { h["ce_specversion"] = "0.3" }},
		{name: "sequence not a number", mut: func(h map[string]string) { h["ce_sequence"] = "two" }},
		{name: "sequence zero", mut: func(h map[string]string) { h["ce_sequence"] = "0" }},
		{name: "bad time", mut: func(h map[string]string) { h["ce_time"] = "yesterday" }},
		{name: "not json content", mut: func(h map[string]string) { h["content-type"] = "text/plain" }},
		{name: "value not json", value: "{"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := valid()
			if tc.mut != nil {
				tc.mut(h)
			}
			value := tc.value
			if value == "" {
				value = `{}`
			}
			if _, err := inbox.Decode(msg(h, value)); !errors.Is(err, inbox.ErrUndecodable) {
				t.Errorf("err = %v, want ErrUndecodable", err)
			}
		})
	}

	// Without ce_subject the key is the aggregate id; without ce_sequence the
	// event is unordered.
	h := valid()
	delete(h, "ce_subject")
	delete(h, "ce_sequence")
	got, err = inbox.Decode(msg(h, `{}`))
	if err != nil || got.Subject != "key-1" || got.Sequence != 0 {
		t.Errorf("got %+v, %v", got, err)
	}
}
