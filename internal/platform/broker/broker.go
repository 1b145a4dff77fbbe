// Package broker holds paylab's Kafka conventions: the client configuration
// every component starts from, and the topics the system needs.
package broker

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/paylab/paylab/pkg/outbox"
)

// Version is the Kafka protocol version paylab speaks. Kafka 4 removed the
// oldest protocol versions, so it is set explicitly rather than left to
// sarama's conservative default.
var Version = sarama.V4_0_0_0

// Topic names. Events of one order share a key (the order id) and therefore a
// partition, which keeps them in order.
const (
	OrderEvents           = "order-events"
	OrderEventsDeadLetter = "order-events.dlq"
)

// Config returns a sarama configuration with paylab's defaults.
func Config(clientID string) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = Version
	cfg.ClientID = clientID
	return withSecurity(cfg)
}

// ProducerConfig returns the configuration of an idempotent producer: every
// write is acknowledged by all in-sync replicas, retries cannot duplicate or
// reorder a partition's messages.
func ProducerConfig(clientID string) *sarama.Config {
	cfg := Config(clientID)
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	return cfg
}

// RelayProducerConfig is the outbox relay's producer: ProducerConfig, with
// sarama giving up on a message well inside the relay's publish timeout (half
// the lease TTL), so an unacknowledged send is not still retried by the
// producer when another relay takes the event over.
func RelayProducerConfig(clientID string, leaseTTL time.Duration) *sarama.Config {
	cfg := outbox.KafkaProducerConfig(leaseTTL)
	cfg.Version = Version
	cfg.ClientID = clientID
	return withSecurity(cfg)
}

// SplitBrokers parses a comma-separated list of host:port addresses.
func SplitBrokers(list string) []string {
	var out []string
	for _, b := range strings.Split(list, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// EnsureTopic creates topic with the given partitions unless it exists. Its
// replication factor and min.insync.replicas are the cluster's defaults
// (default.replication.factor, min.insync.replicas): 1 and 1 on one broker,
// 3 and 2 on the local cluster (KAFKA_NODES=3) and compose's cluster profile,
// where a write acknowledged with acks=all is on at least two brokers.
func EnsureTopic(admin sarama.ClusterAdmin, topic string, partitions int32) error {
	err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: -1}, false)
	var terr *sarama.TopicError
	if errors.As(err, &terr) && terr.Err == sarama.ErrTopicAlreadyExists {
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating topic %s: %w", topic, err)
	}
	return nil
}

// Replication describes how a topic's partitions are replicated and led.
type Replication struct {
	Factor        int // replicas of each partition
	InSyncShort   int // partitions with fewer in-sync replicas than replicas
	LeaderPerNode map[int32]int
}

// TopicReplication reports topic's replication factor and where its
// partitions' leaders are, from the cluster's metadata alone: cheap enough
// to poll while brokers fail (TopicMinInSync reads the topic's config).
func TopicReplication(admin sarama.ClusterAdmin, topic string) (Replication, error) {
	r := Replication{LeaderPerNode: map[int32]int{}}
	var meta []*sarama.TopicMetadata
	err := whileTopicUnknown(func() (err error) {
		if meta, err = admin.DescribeTopics([]string{topic}); err != nil {
			return err
		}
		if len(meta) != 1 {
			return fmt.Errorf("%d answers", len(meta))
		}
		if meta[0].Err != sarama.ErrNoError {
			return meta[0].Err
		}
		return nil
	})
	if err != nil {
		return r, fmt.Errorf("describing topic %s: %w", topic, err)
	}
	for _, p := range meta[0].Partitions {
		r.Factor = max(r.Factor, len(p.Replicas))
		if len(p.Isr) < len(p.Replicas) {
			r.InSyncShort++
		}
		r.LeaderPerNode[p.Leader]++
	}
	return r, nil
}

// whileTopicUnknown calls ask until it stops failing with "unknown topic or
// partition", for about ten seconds at most: a topic just created reaches
// every broker's metadata a moment later, and the broker asked may not know
// it yet.
func whileTopicUnknown(ask func() error) error {
	for attempt := 0; ; attempt++ {
		err := ask()
		if !errors.Is(err, sarama.ErrUnknownTopicOrPartition) || attempt == 50 {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TopicMinInSync reads topic's min.insync.replicas.
func TopicMinInSync(admin sarama.ClusterAdmin, topic string) (string, error) {
	var results []*sarama.ConfigResourceResult
	err := whileTopicUnknown(func() (err error) {
		results, err = admin.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: topic,
			ConfigNames: []string{"min.insync.replicas"}}}, sarama.DescribeConfigsOptions{})
		switch {
		case err != nil:
			return err
		case len(results) != 1:
			return fmt.Errorf("%d answers", len(results))
		case results[0].ErrorCode != sarama.ErrNoError:
			return results[0].ErrorCode
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("reading min.insync.replicas of %s: %w", topic, err)
	}
	for _, e := range results[0].Configs {
		if e.Name == "min.insync.replicas" {
			return e.Value, nil
		}
	}
	return "", nil
}
