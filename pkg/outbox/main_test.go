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

	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/pkg/outbox/internal/testenv"
)

// childRelayEnv makes the test binary run one relay instead of the tests:
// crash tests re-execute themselves as a real, separate relay process.
const childRelayEnv = "OUTBOX_TEST_CHILD_RELAY"

// crashExitCode is the exit status of a child relay crashed at a hook: a
// SIGKILL's, what a supervisor sees of a killed process.
const crashExitCode = 137

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
// CRASH_AT (the hook, "relay.after_lease" or
// "relay.after_publish_before_mark", that exits the process at once with
// crashExitCode on its first call, leaving everything as a crash does); with
// RELAY_MODE=wal, a WAL relay on RELAY_SLOT publishing with the CloudEvents
// source RELAY_SOURCE.
func runChildRelay() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "child relay:", err); return 1 }
	crashAt := os.Getenv("CRASH_AT")
	crash := func(point string) func(context.Context) error {
		return func(context.Context) error {
			if point == crashAt {
				os.Exit(crashExitCode)
			}
			return nil
		}
	}
	hooks := outbox.Hooks{
		AfterLease:             crash("relay.after_lease"),
		AfterPublishBeforeMark: crash("relay.after_publish_before_mark"),
	}
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return fail(err)
	}
	defer pool.Close()
	producer, err := sarama.NewAsyncProducer(testenv.Brokers(), testenv.ProducerConfig())
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
