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

func startPost(ctx context.Context, msg inbox.Message, orderID, kind string, lines int) (context.Context, trace.Span) {
	return otel.Tracer(TracerName).Start(ctx, PostSpanName, trace.WithAttributes(
		semconv.DBSystemNamePostgreSQL,
		attribute.String("ledger.order_id", orderID),
		attribute.String("ledger.entry_kind", kind),
		attribute.Int("ledger.postings", lines),
		semconv.CloudEventsEventID(msg.ID.String()),
	))
}

func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "journal entry not written")
	}
	span.End()
}
