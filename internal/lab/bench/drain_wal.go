package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/telemetry"
	"github.com/paylab/paylab/pkg/outbox"
)

// drainWAL is S2 for the WAL relay: a fresh orders database, its slot and
// publication (the run's role gets REPLICATION), n undispatched events
// committed in txs equal transactions after the slot exists, then ONE WAL
// relay (outbox.NewWALRelay, the relay's producer settings) drains them; the
// clock, and the CPU sample, run from its start until it has recorded every
// event published. The slot is dropped at the end, also after an error: a
// slot nobody reads keeps the server's WAL.
//
// guard is the relay's WALConfig.StandbyGuard; checks is how many times the
// guard read the standbys' positions (StandbyPositions, also in
// res.Statements): on a server without synchronous standbys, auto costs one
// reading a second of the drain, off none.
func (e *env) drainWAL(ctx context.Context, n, txs int, guard outbox.StandbyGuard) (res DrainResult, checks float64, err error) {
	res = DrainResult{Relays: 1, Events: n}
	stage := fmt.Sprintf("pwal%d%s", n, randomHex(2)) // one per call: a run may drain several
	dbURL, topic, err := e.databaseAndTopic(ctx, stage)
	if err != nil {
		return res, 0, err
	}
	slot, drop, err := e.relaySlot(ctx, dbURL, stage)
	if err != nil {
		return res, 0, err
	}
	defer func() { err = errors.Join(err, drop()) }()

	pcfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return res, 0, err
	}
	tracer := newStatements()
	pcfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return res, 0, err
	}
	defer pool.Close()
	reg := prometheus.NewRegistry()
	cfg := outbox.WALConfig{ID: "bench-wal-relay", MetricPrefix: telemetry.OutboxMetricPrefix, Slot: slot,
		Registerer: reg, StandbyGuard: guard}

	if err := withConn(ctx, dbURL, func(c *pgx.Conn) error { return seedOutboxTx(ctx, c, topic, n, txs, false) }); err != nil {
		return res, 0, err
	}

	producer, err := sarama.NewAsyncProducer(e.cfg.Brokers, broker.RelayProducerConfig("paylab-bench-wal-relay", outbox.DefaultLeaseTTL))
	if err != nil {
		return res, 0, fmt.Errorf("relay producer: %w", err)
	}
	pub := outbox.NewKafkaPublisher(producer, "/paylab/orders")
	defer pub.Close()
	relay, err := outbox.NewWALRelay(pool, dbURL, pub, cfg)
	if err != nil {
		return res, 0, err
	}
	cpu := sampleCPU()
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- relay.Run(rctx) }()
	stop := func() error { cancel(); return <-done }
	var end time.Time
	for {
		got, err := gathered(reg, telemetry.OutboxMetricPrefix+"_published_total")
		if err != nil {
			return res, 0, errors.Join(err, stop())
		}
		if got >= float64(n) {
			end = time.Now()
			res.CPU = cpu.perEvent(sampleCPU(), n, 0)
			res.Statements = tracer.counts(n)
			break
		}
		select {
		case <-ctx.Done():
			return res, 0, errors.Join(ctx.Err(), stop())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := stop(); err != nil {
		return res, 0, fmt.Errorf("WAL relay: %w", err)
	}
	var pending int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE dispatched_at IS NULL`).Scan(&pending); err != nil {
		return res, 0, err
	}
	if pending > 0 {
		return res, 0, fmt.Errorf("%d events still pending after the WAL relay recorded %d", pending, n)
	}
	res.Seconds = end.Sub(start).Seconds()
	res.PerSecond = perSecond(n, end.Sub(start))
	checks, err = gathered(reg, telemetry.OutboxMetricPrefix+"_wal_standby_checks_total")
	return res, checks, err
}

// gathered reads a counter from reg.
func gathered(reg *prometheus.Registry, name string) (float64, error) {
	families, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) > 0 {
			return f.GetMetric()[0].GetCounter().GetValue(), nil
		}
	}
	return 0, nil
}
