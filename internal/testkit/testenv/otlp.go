package testenv

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// OTLP is a trace collector of the test's own: an OTLP/HTTP receiver on
// loopback (protobuf encoding, as the Go SDK's otlptracehttp exporter sends)
// that keeps every span it is sent, so a test can check what a service
// process really exports.
type OTLP struct {
	// Endpoint is the value of OTEL_EXPORTER_OTLP_ENDPOINT for a process
	// that should export to it.
	Endpoint string

	mu    sync.Mutex
	spans []Span
}

// StartOTLP starts a receiver, stopped when the test ends.
func StartOTLP(t testing.TB) *OTLP {
	t.Helper()
	o := &OTLP{}
	srv := httptest.NewServer(http.HandlerFunc(o.receive))
	t.Cleanup(srv.Close)
	o.Endpoint = srv.URL
	return o
}

// Spans returns the spans received so far.
func (o *OTLP) Spans() []Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Span(nil), o.spans...)
}

func (o *OTLP) receive(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		defer gz.Close()
		body = gz
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		service := attributes(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, ps := range ss.GetSpans() {
				got = append(got, fromProto(service, ps))
			}
		}
	}
	o.mu.Lock()
	o.spans = append(o.spans, got...)
	o.mu.Unlock()
	resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

func fromProto(service string, ps *tracepb.Span) Span {
	s := Span{
		Service: service, Name: ps.GetName(), Kind: trace.SpanKind(ps.GetKind()),
		Attributes: attributes(ps.GetAttributes()),
		Error:      ps.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
	}
	copy(s.TraceID[:], ps.GetTraceId())
	copy(s.SpanID[:], ps.GetSpanId())
	copy(s.Parent[:], ps.GetParentSpanId())
	for _, e := range ps.GetEvents() {
		s.Events = append(s.Events, e.GetName())
	}
	for _, l := range ps.GetLinks() {
		var cfg trace.SpanContextConfig
		copy(cfg.TraceID[:], l.GetTraceId())
		copy(cfg.SpanID[:], l.GetSpanId())
		s.Links = append(s.Links, trace.NewSpanContext(cfg))
	}
	return s
}

// attributes flattens OTLP attributes to strings (as attribute.Value.Emit
// renders them).
func attributes(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		var s string
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			s = x.StringValue
		case *commonpb.AnyValue_IntValue:
			s = strconv.FormatInt(x.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			s = strconv.FormatBool(x.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			s = strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
		default:
			s = v.String()
		}
		out[kv.GetKey()] = s
	}
	return out
}
