package broker_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// EnsureTopic leaves the replication to the cluster: the topic gets the
// brokers' default.replication.factor and min.insync.replicas (1 and 1 on
// one broker, 3 and 2 on a cluster of three), and a second call finds it
// there.
func TestEnsureTopicTakesTheClusterDefaults(t *testing.T) {
	t.Parallel()
	admin, err := sarama.NewClusterAdmin(testenv.Brokers(), testenv.KafkaConfig())
	if err != nil {
		t.Fatalf("connecting to Kafka (is the stack up? make env-up): %v", err)
	}
	t.Cleanup(func() { admin.Close() })
	topic := fmt.Sprintf("t-ensure-topic-%d", time.Now().UnixNano())
	for range 2 {
		if err := broker.EnsureTopic(admin, topic, 3); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if err := admin.DeleteTopic(topic); err != nil {
			t.Logf("deleting topic %s: %v", topic, err)
		}
	})

	nodes, _, err := admin.DescribeCluster()
	if err != nil || len(nodes) == 0 {
		t.Fatalf("describing the cluster: %d brokers, %v", len(nodes), err)
	}
	results, err := admin.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.BrokerResource,
		Name:        strconv.Itoa(int(nodes[0].ID())),
		ConfigNames: []string{"default.replication.factor", "min.insync.replicas"}}}, sarama.DescribeConfigsOptions{})
	if err != nil || len(results) != 1 {
		t.Fatalf("the broker's defaults: %v", err)
	}
	defaults := map[string]string{}
	for _, e := range results[0].Configs {
		defaults[e.Name] = e.Value
	}

	r, err := broker.TopicReplication(admin, topic)
	if err != nil {
		t.Fatal(err)
	}
	minInSync, err := broker.TopicMinInSync(admin, topic)
	if err != nil {
		t.Fatal(err)
	}
	if strconv.Itoa(r.Factor) != defaults["default.replication.factor"] || minInSync != defaults["min.insync.replicas"] {
		t.Errorf("replication factor %d, min.insync.replicas %q; the cluster's defaults are %v", r.Factor, minInSync, defaults)
	}
	led := 0
	for _, n := range r.LeaderPerNode {
		led += n
	}
	if led != 3 || r.LeaderPerNode[-1] != 0 {
		t.Errorf("leaders %v, want one for each of the 3 partitions", r.LeaderPerNode)
	}
}
