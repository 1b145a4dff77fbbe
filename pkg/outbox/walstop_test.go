package outbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

// A clean stop is quiet: stopped while it streams, and while events are
// being published, a reader logs no error and no warning. (It used to log
// "the replication stream broke; reconnecting" with no error now and then:
// it read the stop a moment before it reached the context it checked.)
func TestWALRelayStopsWithoutErrors(t *testing.T) {
	t.Parallel()
	f := walSetup(t, 1)
	ctx := testenv.Context(t)
	pub := newKafkaPublisher(t, testenv.Brokers())
	for i := range 8 {
		logs := &levelRecorder{}
		reg := prometheus.NewRegistry()
		cfg := f.config(t, "wal-0", reg)
		cfg.Logger = slog.New(logs)
		r, err := outbox.NewWALRelay(f.pool, f.url, pub, cfg)
		if err != nil {
			t.Fatal(err)
		}
		rctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx) }()
		testenv.Eventually(t, time.Minute, "the relay reading", func() bool {
			return metricValue(t, reg, "outbox_wal_active_reader") == 1
		})
		for k := range i * 5 {
			enqueue(t, ctx, f.pool, event(f.topic, fmt.Sprintf("order-%d-%d", i, k), 1))
		}
		stop()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got := logs.above(slog.LevelWarn); len(got) > 0 {
			t.Errorf("stop %d logged: %s", i, strings.Join(got, "; "))
		}
	}
}

// levelRecorder is a slog handler that keeps the messages of warnings and
// errors.
type levelRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (h *levelRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *levelRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *levelRecorder) WithGroup(string) slog.Handler            { return h }
func (h *levelRecorder) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		msg := r.Level.String() + " " + r.Message
		r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
		h.mu.Lock()
		h.msgs = append(h.msgs, msg)
		h.mu.Unlock()
	}
	return nil
}

func (h *levelRecorder) above(slog.Level) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.msgs...)
}
