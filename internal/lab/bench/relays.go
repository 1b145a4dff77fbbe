package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/pkg/outbox"
)

// relays are relays running in this process, each as a separate relay
// process would be: its own pool, its own producer (the relay's settings,
// broker.RelayProducerConfig), the default outbox.Config, so LISTEN/NOTIFY
// wakes it and the poll interval is the fallback; polling only sets
// outbox.RelayConfig.PollOnly, so the poll interval alone finds the work.
type relays struct {
	cancel context.CancelFunc
	done   []chan error
	pools  []*pgxpool.Pool
	pubs   []*outbox.KafkaPublisher
}

// relaySessionName is the application_name of the bench's relays' sessions.
const relaySessionName = "paylab-bench-relay"

// startRelays starts n relays on the outbox at dbURL; tracer (may be nil)
// sees their statements.
func (e *env) startRelays(ctx context.Context, dbURL string, n int, pollingOnly bool, tracer *statements) (*relays, error) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &relays{cancel: cancel}
	for i := range n {
		cfg, err := pgxpool.ParseConfig(dbURL)
		if err != nil {
			r.stop()
			return nil, err
		}
		if tracer != nil {
			cfg.ConnConfig.Tracer = tracer
		}
		cfg.ConnConfig.RuntimeParams["application_name"] = relaySessionName // S4 tells its backends apart
		pool, err := pgxpool.NewWithConfig(rctx, cfg)
		if err != nil {
			r.stop()
			return nil, err
		}
		r.pools = append(r.pools, pool)
		producer, err := sarama.NewAsyncProducer(e.cfg.Brokers, broker.RelayProducerConfig("paylab-bench-relay", outbox.DefaultLeaseTTL))
		if err != nil {
			r.stop()
			return nil, fmt.Errorf("relay producer: %w", err)
		}
		pub := outbox.NewKafkaPublisher(producer, "/paylab/orders")
		r.pubs = append(r.pubs, pub)
		relay, err := outbox.NewRelay(pool, pub, outbox.RelayConfig{ID: fmt.Sprintf("bench-relay-%d", i), PollOnly: pollingOnly})
		if err != nil {
			r.stop()
			return nil, err
		}
		done := make(chan error, 1)
		r.done = append(r.done, done)
		go func() { done <- relay.Run(rctx) }()
	}
	return r, nil
}

// stop stops the relays (each finishes its batch in flight) and closes
// their producers and pools.
func (r *relays) stop() error {
	r.cancel()
	var errs []error
	for _, d := range r.done {
		errs = append(errs, <-d)
	}
	for _, p := range r.pubs {
		errs = append(errs, p.Close())
	}
	for _, p := range r.pools {
		p.Close()
	}
	return errors.Join(errs...)
}
