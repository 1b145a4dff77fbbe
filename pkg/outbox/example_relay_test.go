package outbox_test

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paylab/paylab/pkg/outbox"
)

// Run a relay: it publishes every committed outbox event to Kafka, in
// per-aggregate order, sharing the work with any other relays through
// leases, until the process is interrupted.
func ExampleNewRelay() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))

	pool, err := pgxpool.New(ctx, "postgres://shop@127.0.0.1:5432/shop")
	if err != nil {
		log.Error("opening the database", "error", err)
		return
	}
	defer pool.Close()

	// Idempotent producer: acks from all in-sync replicas, one request in
	// flight, successes and errors returned, sends bounded by the lease.
	const leaseTTL = 30 * time.Second // a dead relay's events are taken over after this
	producerConfig := outbox.KafkaProducerConfig(leaseTTL)
	producerConfig.Version = sarama.V4_0_0_0
	producer, err := sarama.NewAsyncProducer([]string{"127.0.0.1:9092"}, producerConfig)
	if err != nil {
		log.Error("connecting to Kafka", "error", err)
		return
	}
	publisher := outbox.NewKafkaPublisher(producer, "/shop/carts")
	defer publisher.Close()

	relay, err := outbox.NewRelay(pool, publisher, outbox.RelayConfig{
		LeaseTTL:   leaseTTL,
		Logger:     log,
		Registerer: prometheus.DefaultRegisterer,
	})
	if err != nil {
		log.Error("configuring the relay", "error", err)
		return
	}
	if err := relay.Run(ctx); err != nil {
		log.Error("relay stopped", "error", err)
	}
}
