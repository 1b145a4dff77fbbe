package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/jackc/pgx/v5/pgxpool"
)

// kafkaVersion is the protocol version paylab speaks (internal/platform/broker).
var kafkaVersion = sarama.V4_0_0_0

// pollEvery is how often the drain counts the topic's records.
const pollEvery = 50 * time.Millisecond

// drainConfig is one drain.
type drainConfig struct {
	DB             string
	Brokers        []string
	Topic          string
	N              int
	Timeout        time.Duration
	ForwarderTopic string
}

func (c drainConfig) validate() error {
	switch {
	case c.DB == "":
		return errors.New("no -db")
	case len(c.Brokers) == 0:
		return errors.New("no -brokers")
	case c.Topic == "":
		return errors.New("no -topic")
	case c.N < 1:
		return errors.New("-n must be at least 1")
	case c.Timeout <= 0:
		return errors.New("-timeout must be positive")
	}
	return nil
}

// drainResult is what drain prints.
type drainResult struct {
	Events     int     `json:"events"`
	Seconds    float64 `json:"seconds"`
	PerSecond  float64 `json:"per_second"`
	CPUSeconds float64 `json:"cpu_seconds"` // this process, user + system, over Seconds
	// Records is how many records the topic gained in all, counted once the
	// forwarder stopped: more than Events if it sent some twice.
	Records int64 `json:"records"`
}

// producerConfig is paylab's relay producer (internal/platform/broker
// RelayProducerConfig with pkg/outbox's default lease): idempotent, acks
// from all in-sync replicas, one request in flight, so sarama's retries
// neither duplicate nor reorder a partition's records.
func producerConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = kafkaVersion
	cfg.ClientID = "watermill-peer"
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Timeout = 7500 * time.Millisecond // min(10 s, lease TTL 30 s / 4)
	return cfg
}

// drain runs Watermill's Forwarder — the SQL subscriber on Watermill's
// table, the Kafka publisher keyed by order id — until c.Topic holds c.N
// records more than when it started. The clock and the CPU count run from
// the forwarder's start until the count is reached.
func drain(ctx context.Context, log *slog.Logger, c drainConfig) (drainResult, error) {
	res := drainResult{Events: c.N}
	if err := c.validate(); err != nil {
		return res, err
	}
	if c.ForwarderTopic == "" {
		c.ForwarderTopic = defaultForwarderTopic
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	logger := watermill.NewSlogLogger(log)

	counter, err := newRecordCounter(c.Brokers, c.Topic)
	if err != nil {
		return res, err
	}
	defer counter.close()
	base, err := counter.total()
	if err != nil {
		return res, err
	}
	pool, err := pgxpool.New(ctx, c.DB)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{
		Brokers:               c.Brokers,
		Marshaler:             kafka.NewWithPartitioningMarshaler(partitionKey),
		OverwriteSaramaConfig: producerConfig(),
	}, logger)
	if err != nil {
		return res, fmt.Errorf("kafka publisher: %w", err)
	}
	defer pub.Close()
	sub, err := sql.NewSubscriber(sql.BeginnerFromPgx(pool), subscriberConfig(), logger)
	if err != nil {
		return res, fmt.Errorf("sql subscriber: %w", err)
	}
	defer sub.Close()
	fwd, err := forwarder.NewForwarder(sub, pub, logger, forwarder.Config{ForwarderTopic: c.ForwarderTopic})
	if err != nil {
		return res, fmt.Errorf("forwarder: %w", err)
	}

	cpu0 := cpuTime()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- fwd.Run(ctx) }()
	stop := func() error {
		cerr := fwd.Close()
		return errors.Join(cerr, <-done)
	}
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return res, fmt.Errorf("the forwarder stopped before the topic held %d records: %w", c.N, err)
		case <-ctx.Done():
			got, _ := counter.total()
			return res, errors.Join(fmt.Errorf("the topic holds %d of %d records: %w", got-base, c.N, ctx.Err()), stop())
		case <-tick.C:
		}
		total, err := counter.total()
		if err != nil {
			return res, errors.Join(err, stop())
		}
		if total-base >= int64(c.N) {
			break
		}
	}
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	if err := stop(); err != nil {
		return res, fmt.Errorf("stopping the forwarder: %w", err)
	}
	total, err := counter.total()
	if err != nil {
		return res, err
	}
	res.Records = total - base
	res.Seconds, res.CPUSeconds = elapsed.Seconds(), cpu.Seconds()
	res.PerSecond = float64(c.N) / elapsed.Seconds()
	log.InfoContext(ctx, "drained", "events", c.N, "records", res.Records, "seconds", res.Seconds, "cpu_seconds", res.CPUSeconds)
	return res, nil
}

// recordCounter counts a topic's records: the sum of its partitions' newest
// offsets.
type recordCounter struct {
	client     sarama.Client
	topic      string
	partitions []int32
}

func newRecordCounter(brokers []string, topic string) (*recordCounter, error) {
	cfg := sarama.NewConfig()
	cfg.Version = kafkaVersion
	cfg.ClientID = "watermill-peer-counter"
	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to Kafka at %v: %w", brokers, err)
	}
	partitions, err := client.Partitions(topic)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("partitions of %s: %w", topic, err)
	}
	return &recordCounter{client: client, topic: topic, partitions: partitions}, nil
}

func (r *recordCounter) total() (int64, error) {
	var sum int64
	for _, p := range r.partitions {
		off, err := r.client.GetOffset(r.topic, p, sarama.OffsetNewest)
		if err != nil {
			return 0, fmt.Errorf("newest offset of %s/%d: %w", r.topic, p, err)
		}
		sum += off
	}
	return sum, nil
}

func (r *recordCounter) close() { r.client.Close() }

// cpuTime is the CPU this process has used so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
