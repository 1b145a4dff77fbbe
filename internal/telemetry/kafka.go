package telemetry

import (
	"context"

	"github.com/IBM/sarama"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// HeaderCarrier adapts Kafka record headers to OpenTelemetry's TextMapCarrier,
// so trace context travels as the W3C `traceparent` and `tracestate` headers.
type HeaderCarrier struct{ Headers *[]sarama.RecordHeader }

var _ propagation.TextMapCarrier = HeaderCarrier{}

// Get returns the value of the first header named key.
func (c HeaderCarrier) Get(key string) string {
	for _, h := range *c.Headers {
		if string(h.Key) == key {
			return string(h.Value)
		}
	}
	return ""
}

// Set replaces or adds the header named key.
func (c HeaderCarrier) Set(key, value string) {
	for i, h := range *c.Headers {
		if string(h.Key) == key {
			(*c.Headers)[i].Value = []byte(value)
			return
		}
	}
	*c.Headers = append(*c.Headers, sarama.RecordHeader{Key: []byte(key), Value: []byte(value)})
}

// Keys lists the header names.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, len(*c.Headers))
	for i, h := range *c.Headers {
		keys[i] = string(h.Key)
	}
	return keys
}

// ConsumerHeaders copies a consumed message's headers into a carrier.
func ConsumerHeaders(msg *sarama.ConsumerMessage) HeaderCarrier {
	headers := make([]sarama.RecordHeader, 0, len(msg.Headers))
	for _, h := range msg.Headers {
		if h != nil {
			headers = append(headers, *h)
		}
	}
	return HeaderCarrier{Headers: &headers}
}

// Extract returns ctx carrying the remote span context found in carrier.
func Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	return otel.GetTextMapPropagator().Extract(ctx, carrier)
}

// Inject writes ctx's span context into carrier.
func Inject(ctx context.Context, carrier propagation.TextMapCarrier) {
	otel.GetTextMapPropagator().Inject(ctx, carrier)
}

// MapCarrier is a plain map carrier, e.g. for the headers stored on an outbox row.
type MapCarrier = propagation.MapCarrier
