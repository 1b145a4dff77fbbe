package paymenttrace_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/telemetry"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/services/orders/internal/orderapp"
	"github.com/paylab/paylab/services/orders/internal/orderhttp"
)

// A payment placed over HTTP is one trace from the caller to both
// consumers:
//
//	caller (the test's client span)
//	└─ POST /v1/payments              server, orders API
//	   └─ orders tx place_payment     the transaction; the outbox row stores its context
//	      └─ send <topic>             producer, the relay (its batch span links to it)
//	         ├─ process <topic>       consumer, ledger
//	         │  └─ ledger post entry
//	         └─ process <topic>       consumer, notifications
//	            └─ smtp send
//
// The same with either relay: the polling relay (RELAY_MODE=poll) and the
// WAL relay (RELAY_MODE=wal).
func TestOnePaymentIsOneTrace(t *testing.T) {
	bins := buildServices(t)
	for _, mode := range []string{relayPoll, relayWAL} {
		t.Run(mode, func(t *testing.T) { onePaymentIsOneTrace(t, bins, mode) })
	}
}

// The relay modes.
const (
	relayPoll = "poll"
	relayWAL  = "wal"
)

func onePaymentIsOneTrace(t *testing.T, bins, mode string) {
	memory := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(memory))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(telemetry.Propagator())
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
		_ = tp.Shutdown(context.Background())
	})

	topic := testenv.NewTopic(t, 3)
	collector := testenv.StartOTLP(t)
	mailpit := testenv.StartMailpit(t)
	ordersDB, ordersURL := testenv.NewPool(t, "orders")
	ledgerDB, ledgerURL := testenv.NewPool(t, "ledger")
	notifyDB, notifyURL := testenv.NewPool(t, "notifications")
	common := []string{
		"KAFKA_BROKERS=" + strings.Join(testenv.Brokers(), ","), "ORDERS_TOPIC=" + topic,
		"ADMIN_ADDR=127.0.0.1:0", "OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.Endpoint,
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=", "OTEL_SERVICE_NAME=", "OTEL_BSP_SCHEDULE_DELAY=100",
	}
	startService(t, "ledger", bins+"/ledger", append(common, "DATABASE_URL="+ledgerURL, "HTTP_ADDR=127.0.0.1:0",
		"DEAD_LETTER_TOPIC="+testenv.NewTopic(t, 1), "CONSUMER_GROUP=ledger-"+topic)...)
	startService(t, "notifications", bins+"/notifications", append(common, "DATABASE_URL="+notifyURL,
		"SMTP_ADDR="+mailpit.SMTPAddr, "DEAD_LETTER_TOPIC="+testenv.NewTopic(t, 1), "CONSUMER_GROUP=notifications-"+topic)...)

	api, key := ordersAPI(t, ordersDB, topic)
	runRelay(t, ordersDB, ordersURL, mode)

	// The caller's span: the request carries its traceparent.
	ctx, caller := tp.Tracer("test").Start(context.Background(), "client")
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/payments",
		strings.NewReader(`{"customer_id":"cus_42","merchant_id":"mer_7","amount":1999,"currency":"EUR"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, req)
	caller.End()
	if rec.Code != http.StatusCreated {
		t.Fatalf("POST /v1/payments = %d %s", rec.Code, rec.Body)
	}
	var order struct{ ID string }
	if err := json.Unmarshal(rec.Body.Bytes(), &order); err != nil {
		t.Fatal(err)
	}
	var eventID, stored string
	if err := ordersDB.QueryRow(context.Background(), `SELECT event_id::text, headers->>'traceparent' FROM outbox
		WHERE aggregate_id = $1`, order.ID).Scan(&eventID, &stored); err != nil {
		t.Fatal(err)
	}

	count := func(pool *pgxpool.Pool, query string) int {
		var n int
		if err := pool.QueryRow(context.Background(), query, order.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	testenv.Eventually(t, 90*time.Second, "the journal entry and the receipt", func() bool {
		return count(ledgerDB, "SELECT count(*) FROM journal_entries WHERE order_id = $1") == 1 &&
			count(notifyDB, "SELECT count(*) FROM notifications WHERE order_id = $1") == 1
	})
	var exported []testenv.Span
	// A child span ends, and may be exported, before its parent: wait for
	// the consumers' own spans too, not only for the ones they wrap.
	testenv.Eventually(t, 30*time.Second, "the consumers' spans", func() bool {
		exported = collector.Spans()
		return len(testenv.FindSpans(exported, "ledger post entry", "ledger.order_id", order.ID)) == 1 &&
			len(testenv.FindSpans(exported, "smtp send")) == 1 &&
			len(testenv.FindSpans(exported, "process "+topic, "messaging.message.id", eventID)) == 2
	})
	spans := append(testenv.SpansFromStubs(memory.GetSpans(), "in-process"), exported...)

	one := func(name string, attrs ...string) testenv.Span {
		t.Helper()
		found := testenv.FindSpans(spans, name, attrs...)
		if len(found) != 1 {
			t.Fatalf("%d spans %q %v, want 1; all spans:\n%s", len(found), name, attrs, dump(spans))
		}
		return found[0]
	}
	client := one("client")
	server := one("POST /v1/payments")
	tx := one("orders tx place_payment")
	producer := one("send "+topic, "messaging.message.id", eventID)
	batch := one(outbox.BatchSpanName, "outbox.relay.id", "trace-relay")
	ledger := one("process "+topic, "messaging.message.id", eventID, "messaging.consumer.group.name", "ledger-"+topic)
	post := one("ledger post entry", "ledger.order_id", order.ID)
	notify := one("process "+topic, "messaging.message.id", eventID, "messaging.consumer.group.name", "notifications-"+topic)
	smtp := one("smtp send")

	for _, c := range []struct {
		span, parent testenv.Span
		kind         trace.SpanKind
		service      string
	}{
		{server, client, trace.SpanKindServer, "in-process"},
		{tx, server, trace.SpanKindInternal, "in-process"},
		{producer, tx, trace.SpanKindProducer, "in-process"},
		{ledger, producer, trace.SpanKindConsumer, "ledger"},
		{post, ledger, trace.SpanKindInternal, "ledger"},
		{notify, producer, trace.SpanKindConsumer, "notifications"},
		{smtp, notify, trace.SpanKindClient, "notifications"},
	} {
		if c.span.TraceID != client.TraceID || c.span.Parent != c.parent.SpanID || c.span.Kind != c.kind ||
			c.span.Service != c.service || c.span.Error {
			t.Errorf("span %s\n\twant kind %s of service %s, child of %s", c.span, c.kind, c.service, c.parent)
		}
	}
	if want := fmt.Sprintf("00-%s-%s-01", tx.TraceID, tx.SpanID); stored != want {
		t.Errorf("the outbox row stores traceparent %s, want the transaction span's %s", stored, want)
	}
	for _, s := range []testenv.Span{ledger, notify} {
		if s.Attributes["inbox.outcome"] != "processed" || s.Attributes["messaging.destination.name"] != topic {
			t.Errorf("consumer span %s: attributes %v", s, s.Attributes)
		}
	}
	if batch.TraceID == client.TraceID || !linksTo(batch, producer) {
		t.Errorf("batch span %s with links %v: want its own trace, linked to the producer span %s", batch, batch.Links, producer)
	}
}

func linksTo(s, target testenv.Span) bool {
	for _, l := range s.Links {
		if l.TraceID() == target.TraceID && l.SpanID() == target.SpanID {
			return true
		}
	}
	return false
}

func dump(spans []testenv.Span) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "\t%s %v\n", s, s.Attributes)
	}
	return b.String()
}

// ordersAPI is the orders API's handler on the orders database, as the
// orders process serves it, and an API key of merchant mer_7.
func ordersAPI(t *testing.T, pool *pgxpool.Pool, topic string) (http.Handler, string) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	reg := prometheus.NewRegistry()
	app, err := orderapp.New(orderapp.Config{Pool: pool, Topic: topic, Logger: log, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	m, err := orderhttp.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := apikey.NewStore(pool).Create(context.Background(), "mer_7", "trace")
	if err != nil {
		t.Fatal(err)
	}
	return orderhttp.Routes(app, log, m, orderhttp.Security{Keys: apikey.NewAuthenticator(pool, apikey.AuthConfig{})}), key
}

// runRelay runs an outbox relay of the given mode on the orders database
// (pool, reached with url) until the test ends.
func runRelay(t *testing.T, pool *pgxpool.Pool, url, mode string) {
	t.Helper()
	producer, err := sarama.NewAsyncProducer(testenv.Brokers(), broker.ProducerConfig("paymenttrace-relay"))
	if err != nil {
		t.Fatal(err)
	}
	pub := outbox.NewKafkaPublisher(producer, orderapp.Source)
	var run func(context.Context) error
	switch mode {
	case relayWAL:
		cfg := outbox.WALConfig{ID: "trace-relay", PollInterval: 100 * time.Millisecond,
			Slot:           "t_paymenttrace_" + strconv.FormatInt(time.Now().UnixNano()%1e12, 36),
			KeepDispatched: true} // the test reads the event's row after the publish
		setupWAL(t, pool, cfg)
		relay, err := outbox.NewWALRelay(pool, url, pub, cfg)
		if err != nil {
			t.Fatal(err)
		}
		run = relay.Run
	default:
		relay, err := outbox.NewRelay(pool, pub, outbox.RelayConfig{ID: "trace-relay", PollInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		run = relay.Run
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("relay: %v", err)
		}
		_ = pub.Close()
	})
}

// setupWAL gives the orders role the REPLICATION attribute and creates the
// slot and publication of cfg; they are dropped at cleanup, after the
// relay (started later) has stopped.
func setupWAL(t *testing.T, pool *pgxpool.Pool, cfg outbox.WALConfig) {
	t.Helper()
	ctx := testenv.Context(t)
	testenv.GrantReplication(t, ctx, "orders")
	if err := outbox.SetupWAL(ctx, pool, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var err error
		for dctx.Err() == nil {
			if err = outbox.DropWAL(dctx, pool, cfg); err == nil {
				return
			}
			select { // the stopped relay's walsender may still hold the slot a moment
			case <-dctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
		t.Errorf("dropping slot %s: %v", cfg.Slot, err)
	})
}
