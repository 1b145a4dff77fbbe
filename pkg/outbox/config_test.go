package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/paylab/paylab/pkg/outbox/internal/outboxdb"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, v := range []interface{ Validate() error }{Config{}, RelayConfig{}, WALConfig{}} {
		if err := v.Validate(); err != nil {
			t.Fatalf("zero %T: %v", v, err)
		}
	}
	tests := []struct {
		name string
		cfg  interface{ Validate() error }
	}{
		{"bad table", Config{Table: "Shop Outbox"}},
		{"bad metric prefix", Config{MetricPrefix: "shop-outbox"}},
		{"batch too large", RelayConfig{BatchSize: 20000}},
		{"negative batch", RelayConfig{BatchSize: -1}},
		{"lease too short", RelayConfig{LeaseTTL: time.Millisecond}},
		{"negative poll", RelayConfig{PollInterval: -time.Second}},
		{"max backoff below backoff", RelayConfig{RetryBackoff: time.Minute, RetryMaxBackoff: time.Second}},
		{"negative retention batch", RelayConfig{RetentionBatch: -5}},
		{"negative outage max backoff", RelayConfig{OutageMaxBackoff: -time.Second}},
		{"max publish wait below the ack budget", RelayConfig{LeaseTTL: 10 * time.Second, MaxPublishWait: time.Second}},
		{"relay table", RelayConfig{Table: "1outbox"}},
		{"WAL batch too large", WALConfig{BatchSize: 20000}},
		{"WAL lease too short", WALConfig{LeaseTTL: time.Millisecond}},
		{"bad slot", WALConfig{Slot: "Outbox-Slot"}},
		{"bad publication", WALConfig{Publication: "outbox wal"}},
		{"WAL table", WALConfig{Table: "1outbox"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); err == nil {
				t.Fatal("Validate succeeded")
			}
		})
	}
	// Every problem is reported, not the first.
	err := RelayConfig{BatchSize: -1, LeaseTTL: time.Millisecond, Table: "1outbox"}.Validate()
	for _, want := range []string{"batch size", "lease TTL", "1outbox"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %q", err, want)
		}
	}
	if got := (RelayConfig{LeaseTTL: 10 * time.Second}).PublishTimeout(); got != 5*time.Second {
		t.Fatalf("PublishTimeout = %v, want half the TTL", got)
	}
	if got := (RelayConfig{LeaseTTL: 10 * time.Second}).relay().MaxPublishWait; got != 40*time.Second {
		t.Fatalf("default MaxPublishWait = %v, want four lease TTLs", got)
	}
	// Each relay has its own default batch size; the WAL relay's names
	// derive from the table.
	if got := (RelayConfig{}).relay().BatchSize; got != DefaultBatchSize {
		t.Errorf("polling relay batch size %d, want %d", got, DefaultBatchSize)
	}
	w := WALConfig{Table: "shop_outbox"}.relay()
	if w.BatchSize != DefaultWALBatchSize || w.Slot != "shop_outbox_wal_relay" || w.Publication != "shop_outbox_wal" {
		t.Errorf("WAL relay defaults: batch %d, slot %q, publication %q", w.BatchSize, w.Slot, w.Publication)
	}
}

// Permanent, ErrPermanent and IsPermanent mean what they mean in package
// inbox.
func TestPermanent(t *testing.T) {
	t.Parallel()
	if Permanent(nil) != nil {
		t.Fatal("Permanent(nil) is not nil")
	}
	cause := errors.New("message too large")
	err := Permanent(cause)
	if !errors.Is(err, ErrPermanent) || !IsPermanent(err) || !errors.Is(err, cause) {
		t.Fatalf("Permanent(%v) = %v: Is ErrPermanent %t, IsPermanent %t, wraps the cause %t",
			cause, err, errors.Is(err, ErrPermanent), IsPermanent(err), errors.Is(err, cause))
	}
	if IsPermanent(cause) {
		t.Fatal("a plain error is permanent")
	}
}

func TestClassifyPublishErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err       error
		permanent bool
	}{
		{sarama.ConfigurationError("Attempt to produce message larger than configured Producer.MaxMessageBytes"), true},
		{sarama.ErrMessageSizeTooLarge, true},
		{fmt.Errorf("wrapped: %w", sarama.ErrInvalidRecord), true},
		{sarama.ErrNotLeaderForPartition, false},
		{sarama.ErrOutOfBrokers, false},
		{errors.New("EOF"), false},
	}
	for _, tt := range tests {
		if got := errors.Is(classify(tt.err), ErrPermanent); got != tt.permanent {
			t.Errorf("classify(%v) permanent = %v, want %v", tt.err, got, tt.permanent)
		}
	}
}

// The outage pause starts at RetryBackoff, doubles with each consecutive
// outage batch up to OutageMaxBackoff, and starts over once a batch has an
// acknowledged event; the gauge follows.
func TestOutageBackoff(t *testing.T) {
	t.Parallel()
	r, err := NewRelay(nil, nil, RelayConfig{RetryBackoff: time.Second, OutageMaxBackoff: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	down := &batch{rows: make([]outboxdb.ClaimBatchRow, 2), errs: []error{errors.New("down"), errors.New("down")}}
	if !down.isOutage() {
		t.Fatal("a batch that failed entirely is not an outage")
	}
	for _, b := range []*batch{
		{errs: []error{nil, errors.New("down")}},
		{errs: []error{Permanent(errors.New("too large")), errors.New("down")}},
		{},
	} {
		if b.isOutage() {
			t.Fatalf("%v taken for an outage", b.errs)
		}
	}
	ctx := context.Background()
	for _, want := range []time.Duration{1, 2, 4, 5, 5, 5} {
		if got := r.brokerRefused(ctx, len(down.rows), firstError(down.errs)); got != want*time.Second {
			t.Fatalf("outage pause %v, want %v", got, want*time.Second)
		}
	}
	if g := testutil.ToFloat64(r.metrics.brokerOutage); g != 1 {
		t.Fatalf("broker_outage = %v during an outage", g)
	}
	r.brokerBack(ctx)
	if g := testutil.ToFloat64(r.metrics.brokerOutage); g != 0 {
		t.Fatalf("broker_outage = %v after it", g)
	}
	if got := r.brokerRefused(ctx, len(down.rows), firstError(down.errs)); got != time.Second {
		t.Fatalf("first pause of the next outage %v, want RetryBackoff", got)
	}
}
