package deploycheck

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// The cluster profile: kafka-2 and kafka-3 exist only under it, the three
// nodes agree on the voters and the cluster id, every topic gets
// replication factor 3 and min.insync.replicas 2 (kafka's own command
// switches to them when it finds its peers), and init waits for the whole
// cluster before it creates the topics.
func TestComposeClusterProfile(t *testing.T) {
	t.Parallel()
	load := func(profiles ...string) *types.Project {
		opts, err := cli.NewProjectOptions([]string{filepath.Join(root, "docker-compose.yml")},
			cli.WithWorkingDirectory(root), cli.WithEnv(nil), cli.WithProfiles(profiles))
		if err != nil {
			t.Fatal(err)
		}
		p, err := opts.LoadProject(context.Background())
		if err != nil {
			t.Fatalf("docker-compose.yml does not load with profiles %v: %v", profiles, err)
		}
		return p
	}
	if _, ok := load().Services["kafka-2"]; ok {
		t.Error("kafka-2 runs without --profile cluster")
	}
	p := load("cluster")
	const voters = "1@kafka:9093,2@kafka-2:9093,3@kafka-3:9093"
	for i, name := range []string{"kafka-2", "kafka-3"} {
		svc, ok := p.Services[name]
		if !ok {
			t.Fatalf("service %s missing under --profile cluster", name)
		}
		if !slices.Contains(svc.Profiles, "cluster") {
			t.Errorf("%s: not under the cluster profile", name)
		}
		want := map[string]string{
			"KAFKA_NODE_ID": []string{"2", "3"}[i], "KAFKA_CONTROLLER_QUORUM_VOTERS": voters,
			"KAFKA_DEFAULT_REPLICATION_FACTOR": "3", "KAFKA_MIN_INSYNC_REPLICAS": "2",
			"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "3", "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "2",
			"CLUSTER_ID": env(p.Services["kafka"], "CLUSTER_ID"),
		}
		for k, v := range want {
			if got := env(svc, k); got != v {
				t.Errorf("%s: %s=%q, want %q", name, k, got, v)
			}
		}
		if adv := env(svc, "KAFKA_ADVERTISED_LISTENERS"); !strings.Contains(adv, "INTERNAL://"+name+":9092") {
			t.Errorf("%s advertises %s", name, adv)
		}
		if dep, ok := p.Services["init"].DependsOn[name]; !ok || dep.Required || dep.Condition != types.ServiceConditionHealthy {
			t.Errorf("init: want to wait for %s healthy when it runs (required: false), got %+v", name, dep)
		}
		if dep, ok := p.Services["kafka"].DependsOn[name]; !ok || dep.Required {
			t.Errorf("kafka: want %s started first when it runs (required: false), got %+v", name, dep)
		}
	}
	script := strings.Join(p.Services["kafka"].Command, " ")
	for _, want := range []string{"KAFKA_CONTROLLER_QUORUM_VOTERS=" + voters, "KAFKA_DEFAULT_REPLICATION_FACTOR=3",
		"KAFKA_MIN_INSYNC_REPLICAS=2", "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR=3", "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR=2",
		"getent hosts kafka-2", "exec /etc/kafka/docker/run"} {
		if !strings.Contains(script, want) {
			t.Errorf("kafka's command lacks %q", want)
		}
	}
}
