package broker_test

import (
	"errors"
	"testing"

	"github.com/IBM/sarama"

	"github.com/paylab/paylab/internal/platform/broker"
)

// lateAdmin answers DescribeConfigs as a broker that learns of a topic
// after unknown answers: unknown topic or partition until then.
type lateAdmin struct {
	sarama.ClusterAdmin
	unknown int
	calls   int
	err     sarama.KError
}

func (a *lateAdmin) DescribeConfigs([]*sarama.ConfigResource, sarama.DescribeConfigsOptions) ([]*sarama.ConfigResourceResult, error) {
	a.calls++
	if a.calls <= a.unknown {
		return []*sarama.ConfigResourceResult{{ErrorCode: a.err}}, nil
	}
	return []*sarama.ConfigResourceResult{{Configs: []sarama.ConfigEntry{{Name: "min.insync.replicas", Value: "2"}}}}, nil
}

// A topic just created on a cluster reaches the broker asked a moment
// later (paylab init on compose's three brokers met it): TopicMinInSync
// waits for it, and reports any other error at once.
func TestTopicMinInSyncWaitsForANewTopic(t *testing.T) {
	t.Parallel()
	late := &lateAdmin{unknown: 3, err: sarama.ErrUnknownTopicOrPartition}
	if v, err := broker.TopicMinInSync(late, "t"); err != nil || v != "2" || late.calls != 4 {
		t.Errorf("a topic known at the 4th call: %q, %v after %d calls", v, err, late.calls)
	}
	denied := &lateAdmin{unknown: 3, err: sarama.ErrTopicAuthorizationFailed}
	if _, err := broker.TopicMinInSync(denied, "t"); !errors.Is(err, sarama.ErrTopicAuthorizationFailed) || denied.calls != 1 {
		t.Errorf("authorization failed: %v after %d calls, want it at once", err, denied.calls)
	}
}
