package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

func traceparent(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}

// Each published event gets a PRODUCER span that continues the trace stored
// with its row, and the Kafka message carries that span's context — not
// the stored one — so consumers become its children. An event stored
// without trace context starts a trace of its own. The batch has a span of
// its own, linked to every event's span.
func TestRelayPublishesEachEventInAProducerSpanOfItsStoredTrace(t *testing.T) {
	spans, tracer := testenv.RecordSpans(t)
	pool, _ := testenv.NewPool(t, migrate)
	topic := testenv.NewTopic(t, 1)
	ctx := testenv.Context(t)

	var stored []trace.SpanContext
	events := make([]outbox.Event, 3)
	for i := range events {
		events[i] = event(topic, fmt.Sprintf("order-%d", i), 1)
		events[i].Headers = nil
		if i < 2 { // the third is stored without trace context
			_, request := tracer.Start(context.Background(), "request")
			events[i].Headers = map[string]string{"traceparent": traceparent(request.SpanContext())}
			stored = append(stored, request.SpanContext())
			request.End()
		}
	}
	enqueue(t, ctx, pool, events...)
	relay, err := outbox.NewRelay(pool, newKafkaPublisher(t, testenv.Brokers()), outbox.RelayConfig{ID: "traced-relay"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := relay.RunBatch(ctx); err != nil || res.Dispatched != 3 {
		t.Fatalf("batch = %+v, %v; want 3 dispatched", res, err)
	}

	producers := map[string]tracetest.SpanStub{} // by event id
	var batches []tracetest.SpanStub
	for _, s := range spans.GetSpans() {
		switch {
		case s.Name == "send "+topic:
			producers[testenv.SpanAttr(s, "messaging.message.id")] = s
		case s.Name == outbox.BatchSpanName:
			batches = append(batches, s)
		}
	}
	wire := readTraceparents(t, topic, 3)
	for i, e := range events {
		p, ok := producers[e.ID.String()]
		if !ok {
			t.Fatalf("no producer span for event %d; spans: %v", i, spans.GetSpans().Snapshots())
		}
		if p.SpanKind != trace.SpanKindProducer || testenv.SpanAttr(p, "messaging.system") != "kafka" ||
			testenv.SpanAttr(p, "messaging.destination.name") != topic || testenv.SpanAttr(p, "messaging.kafka.message.key") != e.AggregateID {
			t.Errorf("event %d: producer span kind %v attributes %v", i, p.SpanKind, p.Attributes)
		}
		if i < 2 {
			if p.Parent.SpanID() != stored[i].SpanID() || p.SpanContext.TraceID() != stored[i].TraceID() {
				t.Errorf("event %d: producer span %s/%s has parent %s, want the stored span %s/%s", i,
					p.SpanContext.TraceID(), p.SpanContext.SpanID(), p.Parent.SpanID(), stored[i].TraceID(), stored[i].SpanID())
			}
		} else if p.Parent.IsValid() || p.SpanContext.TraceID() == stored[0].TraceID() || p.SpanContext.TraceID() == stored[1].TraceID() {
			t.Errorf("event without stored context: producer span has parent %v in trace %s, want a new trace", p.Parent, p.SpanContext.TraceID())
		}
		if got, want := wire[e.ID.String()], traceparent(p.SpanContext); got != want {
			t.Errorf("event %d: Kafka traceparent %q, want the producer span's %q", i, got, want)
		}
	}

	if len(batches) != 1 {
		t.Fatalf("%d batch spans, want 1", len(batches))
	}
	b := batches[0]
	if testenv.SpanAttr(b, "messaging.batch.message_count") != "3" || testenv.SpanAttr(b, "outbox.relay.id") != "traced-relay" || len(b.Links) != 3 {
		t.Fatalf("batch span attributes %v, %d links", b.Attributes, len(b.Links))
	}
	for _, l := range b.Links {
		p := producers[attrOf(l.Attributes, "messaging.message.id")]
		if l.SpanContext.SpanID() != p.SpanContext.SpanID() || l.SpanContext.TraceID() != p.SpanContext.TraceID() {
			t.Errorf("batch link %v is not the producer span of its event", l.SpanContext)
		}
		if l.SpanContext.TraceID() == b.SpanContext.TraceID() {
			t.Errorf("an event's span is in the batch's trace %s", b.SpanContext.TraceID())
		}
	}
}

// Without a tracer provider the relay records nothing and the stored trace
// context goes on the wire unchanged, so a caller's trace still reaches the
// consumers.
func TestRelayWithoutTracingForwardsTheStoredTraceContext(t *testing.T) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator()) })
	pool, _ := testenv.NewPool(t, migrate)
	topic := testenv.NewTopic(t, 1)
	ctx := testenv.Context(t)
	e := event(topic, "order-1", 1)
	e.Headers["tracestate"] = "congo=t61rcWkgMzE"
	enqueue(t, ctx, pool, e)
	relay, err := outbox.NewRelay(pool, newKafkaPublisher(t, testenv.Brokers()), outbox.RelayConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := relay.RunBatch(ctx); err != nil || res.Dispatched != 1 {
		t.Fatalf("batch = %+v, %v", res, err)
	}
	if got := readTraceparents(t, topic, 1)[e.ID.String()]; got != e.Headers["traceparent"] {
		t.Fatalf("Kafka traceparent %q, want the stored %q", got, e.Headers["traceparent"])
	}
}

func attrOf(kvs []attribute.KeyValue, key attribute.Key) string {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}

// readTraceparents reads n messages of partition 0 of topic and returns
// their traceparent headers by event id.
func readTraceparents(t *testing.T, topic string, n int) map[string]string {
	t.Helper()
	consumer, err := sarama.NewConsumer(testenv.Brokers(), testenv.KafkaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	out := map[string]string{}
	timeout := time.After(30 * time.Second)
	for len(out) < n {
		select {
		case m := <-pc.Messages():
			var id, tp string
			for _, h := range m.Headers {
				switch string(h.Key) {
				case outbox.HeaderID:
					id = string(h.Value)
				case "traceparent":
					tp = string(h.Value)
				}
			}
			out[id] = tp
		case <-timeout:
			t.Fatalf("read %d of %d messages", len(out), n)
		}
	}
	return out
}
