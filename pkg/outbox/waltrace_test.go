package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

// The WAL relay traces its publishes as the polling relay does: each event
// in a PRODUCER span "send <topic>" that continues the trace stored with
// its row, whose context the Kafka message carries; an event stored
// without trace context starts a trace of its own; each publish has a
// batch span of the relay's own, linked to its events' spans. An event
// that failed and is published again gets a span per attempt, each a
// child of the stored context (not of the failed attempt's span), the
// failed one with an error status.
func TestWALRelayPublishesEachEventInAProducerSpanOfItsStoredTrace(t *testing.T) {
	spans, tracer := testenv.RecordSpans(t)
	f := walSetup(t, 1)
	ctx := testenv.Context(t)

	stored := make([]trace.SpanContext, 4) // invalid for the event stored without context
	events := make([]outbox.Event, len(stored))
	for i := range events {
		events[i] = event(f.topic, fmt.Sprintf("order-%d", i), 1)
		events[i].Headers = nil
		if i != 2 { // the third is stored without trace context
			_, request := tracer.Start(context.Background(), "request")
			events[i].Headers = map[string]string{"traceparent": traceparent(request.SpanContext())}
			stored[i] = request.SpanContext()
			request.End()
		}
	}
	retried := events[3] // refused once, transiently, next to events that go through
	var once sync.Once
	kafka := newKafkaPublisher(t, testenv.Brokers())
	pub := outbox.PublisherFunc(func(ctx context.Context, batch []outbox.Event) []error {
		refuse := -1
		for i, e := range batch {
			if e.ID == retried.ID {
				once.Do(func() { refuse = i })
			}
		}
		if refuse < 0 {
			return kafka.Publish(ctx, batch)
		}
		rest := append(append([]outbox.Event(nil), batch[:refuse]...), batch[refuse+1:]...)
		errs := make([]error, len(batch))
		restErrs := kafka.Publish(ctx, rest)
		for i, k := 0, 0; i < len(batch); i++ {
			switch {
			case i == refuse:
				errs[i] = errors.New("injected: not enough in-sync replicas")
			case restErrs != nil:
				errs[i] = restErrs[k]
				k++
			default:
				k++
			}
		}
		return errs
	})
	enqueue(t, ctx, f.pool, events...)
	cfg := f.config(t, "traced-wal-relay", nil)
	cfg.RetryBackoff = 10 * time.Millisecond
	startWALRelay(t, f, pub, cfg)
	testenv.Eventually(t, time.Minute, "every event dispatched", func() bool { return dispatched(t, ctx, f.pool) == 4 })

	producers := map[string][]tracetest.SpanStub{} // by event id, in the order they ended
	var batches []tracetest.SpanStub
	for _, s := range spans.GetSpans() {
		switch {
		case s.Name == "send "+f.topic:
			id := testenv.SpanAttr(s, "messaging.message.id")
			producers[id] = append(producers[id], s)
		case s.Name == outbox.BatchSpanName:
			batches = append(batches, s)
		}
	}
	wire := readTraceparents(t, f.topic, 4)
	for i, e := range events {
		ps := producers[e.ID.String()]
		want := 1
		if e.ID == retried.ID {
			want = 2
		}
		if len(ps) != want {
			t.Fatalf("event %d: %d producer spans, want %d; spans: %v", i, len(ps), want, spans.GetSpans().Snapshots())
		}
		for k, p := range ps {
			if p.SpanKind != trace.SpanKindProducer || testenv.SpanAttr(p, "messaging.system") != "kafka" ||
				testenv.SpanAttr(p, "messaging.destination.name") != f.topic || testenv.SpanAttr(p, "messaging.kafka.message.key") != e.AggregateID {
				t.Errorf("event %d: producer span kind %v attributes %v", i, p.SpanKind, p.Attributes)
			}
			if failed := p.Status.Code == codes.Error; failed != (k < len(ps)-1) {
				t.Errorf("event %d, attempt %d of %d: span status %v", i, k+1, len(ps), p.Status)
			}
			if stored[i].IsValid() {
				if p.Parent.SpanID() != stored[i].SpanID() || p.SpanContext.TraceID() != stored[i].TraceID() {
					t.Errorf("event %d, attempt %d: producer span %s/%s has parent %s, want the stored span %s/%s", i, k+1,
						p.SpanContext.TraceID(), p.SpanContext.SpanID(), p.Parent.SpanID(), stored[i].TraceID(), stored[i].SpanID())
				}
			} else if p.Parent.IsValid() {
				t.Errorf("event without stored context: producer span has parent %v, want a new trace", p.Parent)
			}
		}
		if got, want := wire[e.ID.String()], traceparent(ps[len(ps)-1].SpanContext); got != want {
			t.Errorf("event %d: Kafka traceparent %q, want the acknowledged producer span's %q", i, got, want)
		}
	}

	if len(batches) != 2 {
		t.Fatalf("%d batch spans, want 2 (the batch, then the retry)", len(batches))
	}
	for k, b := range batches {
		n := []int{4, 1}[k]
		if testenv.SpanAttr(b, "messaging.batch.message_count") != fmt.Sprint(n) ||
			testenv.SpanAttr(b, "outbox.relay.id") != "traced-wal-relay" || len(b.Links) != n {
			t.Errorf("batch span %d: attributes %v, %d links; want %d events", k, b.Attributes, len(b.Links), n)
		}
		for _, l := range b.Links {
			found := false
			for _, p := range producers[attrOf(l.Attributes, "messaging.message.id")] {
				found = found || l.SpanContext.SpanID() == p.SpanContext.SpanID()
			}
			if !found || l.SpanContext.TraceID() == b.SpanContext.TraceID() {
				t.Errorf("batch span %d: link %v is not a producer span of its event", k, l.SpanContext)
			}
		}
	}
}
