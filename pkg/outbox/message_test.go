package outbox_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestProducerMessageCloudEventsBinaryMode(t *testing.T) {
	t.Parallel()
	e := captured("0193a5c2-7f3e-7b1a-9c1d-3e5f7a9b1c2d", 3)
	e.ID = uuid.MustParse("0193a5c2-0000-7000-8000-000000000001")
	e.OccurredAt = time.Date(2026, 12, 2, 12, 0, 0, 123456000, time.FixedZone("CET", 3600))
	msg := e.ProducerMessage("/paylab/orders")

	got := map[string]string{}
	for _, h := range msg.Headers {
		got[string(h.Key)] = string(h.Value)
	}
	want := map[string]string{
		"ce_specversion":   "1.0",
		"ce_id":            "0193a5c2-0000-7000-8000-000000000001",
		"ce_source":        "/paylab/orders",
		"ce_type":          "OrderCaptured",
		"ce_time":          "2026-12-02T11:00:00.123456Z",
		"ce_subject":       e.AggregateID,
		"ce_sequence":      "3",
		"ce_schemaversion": "1",
		"ce_aggregatetype": "order",
		"content-type":     "application/json",
		"traceparent":      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("header %s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("headers = %v, want exactly %v", got, want)
	}
	key, _ := msg.Key.Encode()
	value, _ := msg.Value.Encode()
	if string(key) != e.AggregateID || string(value) != string(e.Payload) || msg.Topic != "order-events" {
		t.Errorf("key %q value %q topic %q", key, value, msg.Topic)
	}
}
