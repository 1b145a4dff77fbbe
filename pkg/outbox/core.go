package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/pkg/outbox/internal/outboxdb"
)

// relayCore is what the polling relay (Relay) and the WAL relay (WALRelay)
// share: the table's queries, the publisher and its verdicts, the metrics
// both export, the broker-outage state (outage.go), the backlog gauges
// (stats.go), retention (retention.go) and the publish spans (trace.go).
// Each relay adds how it finds the events and records them.
type relayCore struct {
	pool    *pgxpool.Pool
	queries *outboxdb.Queries
	sql     *sync.Map // the queries rendered for the table
	pub     Publisher
	cfg     relayConfig
	log     *slog.Logger
	metrics *metrics
	outage  outage
}

// newCore validates cfg (with its defaults applied) and registers the
// shared metrics. log is the relay's logger, named after it.
func newCore(pool *pgxpool.Pool, pub Publisher, cfg relayConfig, log func(relayConfig) *slog.Logger) (*relayCore, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("outbox: invalid relay config: %w", err)
	}
	m, err := newMetrics(cfg.Registerer, cfg.MetricPrefix)
	if err != nil {
		return nil, fmt.Errorf("outbox: registering relay metrics: %w", err)
	}
	sql := new(sync.Map)
	return &relayCore{
		pool:    pool,
		queries: outboxdb.New(withCustomPlans(withTable(pool, cfg.Table, sql))),
		sql:     sql,
		pub:     pub,
		cfg:     cfg,
		log:     log(cfg),
		metrics: m,
	}, nil
}

// verdicts normalises a Publisher's answer for n events: nil when every
// event was acknowledged, otherwise one error per event. A publisher that
// answers for another number of events fails them all.
func verdicts(errs []error, n int) []error {
	if errs == nil || len(errs) == n {
		return errs
	}
	err := fmt.Errorf("publisher returned %d results for %d events", len(errs), n)
	errs = make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// publishTraced publishes events within MaxPublishWait, each in its
// producer span (tracePublish), and returns their verdicts. The polling
// relay's publish adds lease renewals while it waits (batch.go).
func (r *relayCore) publishTraced(ctx context.Context, events []Event) []error {
	pt := r.tracePublish(ctx, events)
	pctx, cancel := context.WithTimeout(pt.ctx, r.cfg.MaxPublishWait)
	start := time.Now()
	errs := r.pub.Publish(pctx, events)
	cancel()
	pt.end(errs)
	r.metrics.publishDuration.Observe(time.Since(start).Seconds())
	return verdicts(errs, len(events))
}

// failed counts a failed publish in publish_errors_total, by kind, and
// reports whether retrying cannot help (ErrPermanent).
func (r *relayCore) failed(err error) (permanent bool) {
	permanent = errors.Is(err, ErrPermanent)
	kind := "transient"
	if permanent {
		kind = "permanent"
	}
	r.metrics.publishErrors.WithLabelValues(kind).Inc()
	return permanent
}
