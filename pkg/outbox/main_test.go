package outbox_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/chaos"
	"github.com/paylab/paylab/pkg/outbox"
)

// childRelayEnv makes the test binary run one relay instead of the tests:
// crash tests re-execute themselves as a real, separate relay process.
const childRelayEnv = "OUTBOX_TEST_CHILD_RELAY"

func TestMain(m *testing.M) {
	if os.Getenv(childRelayEnv) != "" {
		os.Exit(runChildRelay())
	}
	goleak.VerifyTestMain(m,
		// go-metrics' meter ticker, started by sarama once per process.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
	)
}

// runChildRelay runs a relay configured by the environment: DATABASE_URL,
// KAFKA_BROKERS, RELAY_ID, RELAY_BATCH_SIZE, RELAY_LEASE_TTL and
// CHAOS_CRASH_AT (a fault point armed to crash on its first hit); with
// RELAY_MODE=wal, a WAL relay on RELAY_SLOT publishing with the CloudEvents
// source RELAY_SOURCE.
func runChildRelay() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "child relay:", err); return 1 }
	hooks := outbox.Hooks{
		AfterLease:             chaos.NewPoint("relay.after_lease").Hit,
		AfterPublishBeforeMark: chaos.NewPoint("relay.after_publish_before_mark").Hit,
	}
	if p := os.Getenv("CHAOS_CRASH_AT"); p != "" {
		if err := chaos.Default.Arm(p, chaos.Fault{Action: chaos.Crash, Count: 1}); err != nil {
			return fail(err)
		}
	}
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return fail(err)
	}
	defer pool.Close()
	producer, err := sarama.NewAsyncProducer(broker.SplitBrokers(os.Getenv("KAFKA_BROKERS")), broker.ProducerConfig("child-relay"))
	if err != nil {
		return fail(err)
	}
	source := os.Getenv("RELAY_SOURCE")
	if source == "" {
		source = "/paylab/orders"
	}
	pub := outbox.NewKafkaPublisher(producer, source)
	defer pub.Close()
	batch, _ := strconv.Atoi(os.Getenv("RELAY_BATCH_SIZE"))
	ttl, _ := time.ParseDuration(os.Getenv("RELAY_LEASE_TTL"))
	if os.Getenv("RELAY_MODE") == "wal" {
		relay, err := outbox.NewWALRelay(pool, os.Getenv("DATABASE_URL"), pub, outbox.WALConfig{ID: os.Getenv("RELAY_ID"),
			BatchSize: batch, LeaseTTL: ttl, Slot: os.Getenv("RELAY_SLOT"), PollInterval: 100 * time.Millisecond, Hooks: hooks})
		if err != nil {
			return fail(err)
		}
		if err := relay.Run(ctx); err != nil {
			return fail(err)
		}
		return 0
	}
	relay, err := outbox.NewRelay(pool, pub, outbox.RelayConfig{ID: os.Getenv("RELAY_ID"), BatchSize: batch, LeaseTTL: ttl,
		Hooks: hooks})
	if err != nil {
		return fail(err)
	}
	if err := relay.Run(ctx); err != nil {
		return fail(err)
	}
	return 0
}
