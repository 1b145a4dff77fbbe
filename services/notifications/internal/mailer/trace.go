package mailer

import (
	"context"
	"net"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the mailer's spans.
const TracerName = "github.com/paylab/paylab/services/notifications/internal/mailer"

// SendSpanName is the name of the span of one SMTP conversation.
const SendSpanName = "smtp send"

func (s *SMTP) startSend(ctx context.Context, m Mail) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{semconv.NetworkTransportTCP, attribute.String("email.message_id", m.MessageID)}
	if host, port, err := net.SplitHostPort(s.Addr); err == nil {
		attrs = append(attrs, semconv.ServerAddress(host))
		if p, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, semconv.ServerPort(p))
		}
	}
	return otel.Tracer(TracerName).Start(ctx, SendSpanName, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

func endSend(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "not accepted by the SMTP server")
	}
	span.End()
}
