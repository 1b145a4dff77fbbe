package inbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/paylab/paylab/pkg/inbox"
	"github.com/paylab/paylab/pkg/inbox/internal/testenv"
)

func hasEvent(s tracetest.SpanStub, name string) bool {
	for _, e := range s.Events {
		if e.Name == name {
			return true
		}
	}
	return false
}

// handlerSpans records the span a handler finds in its context, by event id.
type handlerSpans struct {
	mu   sync.Mutex
	seen map[string][]trace.SpanContext
}

func (h *handlerSpans) handler(ctx context.Context, tx pgx.Tx, msg inbox.Message) error {
	h.mu.Lock()
	h.seen[msg.ID.String()] = append(h.seen[msg.ID.String()], trace.SpanContextFromContext(ctx))
	h.mu.Unlock()
	return recordEffect(ctx, tx, msg)
}

// Every delivery gets a CONSUMER span that is a child of the trace context in
// the message's headers, carries the delivery's outcome, and is the span the
// handler runs in. A redelivery skipped by the inbox is visible on its span;
// a message without trace context starts a trace of its own; a refund held
// until its capture arrives is applied in a span of its own trace too.
func TestConsumerSpansContinueTheProducersTrace(t *testing.T) {
	spans, tracer := testenv.RecordSpans(t)
	f := setup(t)
	hs := &handlerSpans{seen: map[string][]trace.SpanContext{}}
	r := f.start(f.config(func(c *inbox.Config) {
		c.Handlers = map[string]inbox.Handler{"OrderCaptured": hs.handler, "OrderRefunded": hs.handler}
	}))

	withTrace := func(e *cloudEvent) trace.SpanContext {
		_, producer := tracer.Start(context.Background(), "producer")
		defer producer.End()
		e.Headers = map[string]string{}
		otel.GetTextMapPropagator().Inject(trace.ContextWithSpan(context.Background(), producer), propagation.MapCarrier(e.Headers))
		return producer.SpanContext()
	}
	capture, refund, untraced := event("ord-t", 1, "OrderCaptured"), event("ord-t", 2, "OrderRefunded"), event("ord-u", 1, "OrderCaptured")
	captureParent, refundParent := withTrace(capture), withTrace(refund)
	f.publish(refund) // before its capture: parked, applied once the capture is
	testenv.Eventually(t, 60*time.Second, "the refund parked", func() bool { return r.Counts().Parked == 1 })
	f.publish(capture, capture, untraced) // the capture twice: one duplicate
	testenv.Eventually(t, 60*time.Second, "three effects and a duplicate", func() bool {
		return f.count("SELECT count(*) FROM effects") == 3 && r.Counts().Duplicates == 1
	})

	byEvent := map[string][]tracetest.SpanStub{}
	for _, s := range spans.GetSpans() {
		if s.Name == "process "+f.topic {
			byEvent[testenv.SpanAttr(s, "messaging.message.id")] = append(byEvent[testenv.SpanAttr(s, "messaging.message.id")], s)
		}
	}
	for _, s := range byEvent[capture.ID.String()] {
		if s.SpanKind != trace.SpanKindConsumer || s.Parent.SpanID() != captureParent.SpanID() ||
			s.SpanContext.TraceID() != captureParent.TraceID() || testenv.SpanAttr(s, "messaging.destination.name") != f.topic ||
			testenv.SpanAttr(s, "messaging.consumer.group.name") != "g-"+f.topic {
			t.Errorf("capture's consumer span: kind %v parent %s in trace %s, attributes %v; want a child of %s in %s",
				s.SpanKind, s.Parent.SpanID(), s.SpanContext.TraceID(), s.Attributes, captureParent.SpanID(), captureParent.TraceID())
		}
	}
	outcomes := func(id string) (out []string) {
		for _, s := range byEvent[id] {
			out = append(out, testenv.SpanAttr(s, "inbox.outcome"))
		}
		return out
	}
	if got := fmt.Sprint(outcomes(capture.ID.String())); got != "[processed duplicate]" {
		t.Fatalf("capture's span outcomes %s, want [processed duplicate]", got)
	}
	if dup := byEvent[capture.ID.String()][1]; !hasEvent(dup, "inbox: duplicate skipped") {
		t.Errorf("the duplicate's span has no duplicate event: %v", dup.Events)
	}
	if applied, seen := byEvent[capture.ID.String()][0], hs.seen[capture.ID.String()]; len(seen) != 1 || !seen[0].Equal(applied.SpanContext) {
		t.Errorf("the capture's handler ran in span %v, want its consumer span %v", seen, applied.SpanContext)
	}

	// The refund: parked in one span, applied by the capture's delivery in
	// another; both children of the refund's producer span.
	if got := fmt.Sprint(outcomes(refund.ID.String())); got != "[parked processed]" {
		t.Fatalf("refund's span outcomes %s, want [parked processed]", got)
	}
	for _, s := range byEvent[refund.ID.String()] {
		if s.Parent.SpanID() != refundParent.SpanID() || s.SpanContext.TraceID() != refundParent.TraceID() {
			t.Errorf("refund's span %q parent %s, want %s", testenv.SpanAttr(s, "inbox.outcome"), s.Parent.SpanID(), refundParent.SpanID())
		}
	}
	drained := byEvent[refund.ID.String()][1]
	if testenv.SpanAttr(drained, "inbox.drained") != "true" || !hs.seen[refund.ID.String()][0].Equal(drained.SpanContext) {
		t.Errorf("the parked refund was applied in span %v, want its drain span %v", hs.seen[refund.ID.String()], drained.SpanContext)
	}

	// No trace context in the headers: a root span, in a trace of its own.
	u := byEvent[untraced.ID.String()]
	if len(u) != 1 || u[0].Parent.IsValid() || u[0].SpanContext.TraceID() == captureParent.TraceID() {
		t.Fatalf("span of a message without trace context: %+v", u)
	}
}
