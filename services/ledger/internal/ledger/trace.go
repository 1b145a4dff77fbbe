package ledger

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/paylab/paylab/pkg/inbox"
)

// TracerName is the instrumentation scope of the ledger's spans.
const TracerName = "github.com/paylab/paylab/services/ledger/internal/ledger"

// PostSpanName is the name of the span of one journal entry's insert.
const PostSpanName = "ledger post entry"

// startPosts starts one span per entry of a run, each under its event's
// inbox span: the run writes all its entries with the same statements, so
// every entry's span covers the whole run (ledger.run_size says how many
// entries it had). end ends them all.
func startPosts(ctx context.Context, entries []*entry) (end func(error)) {
	tracer := otel.Tracer(TracerName)
	spans := make([]trace.Span, 0, len(entries))
	for _, e := range entries {
		_, span := tracer.Start(inbox.MessageContext(ctx, e.msg), PostSpanName, trace.WithAttributes(
			semconv.DBSystemNamePostgreSQL,
			attribute.String("ledger.order_id", e.orderID),
			attribute.String("ledger.entry_kind", e.kind),
			attribute.Int("ledger.run_size", len(entries)),
			semconv.CloudEventsEventID(e.msg.ID.String()),
		))
		spans = append(spans, span)
	}
	return func(err error) {
		for _, span := range spans {
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, "journal entries not written")
			}
			span.End()
		}
	}
}
