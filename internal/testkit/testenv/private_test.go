package testenv_test

import (
	"testing"

	"github.com/IBM/sarama"

	"github.com/paylab/paylab/internal/testkit/testenv"
)

// A private broker can be stopped and started again without touching the
// shared stack.
func TestPrivateKafkaStopStart(t *testing.T) {
	t.Parallel()
	k := testenv.StartKafka(t)
	ping := func() error {
		c, err := sarama.NewClient(k.Brokers(), testenv.KafkaConfig())
		if err != nil {
			return err
		}
		return c.Close()
	}
	if err := ping(); err != nil {
		t.Fatalf("private broker not reachable: %v", err)
	}
	k.Stop(t)
	cfg := testenv.KafkaConfig()
	cfg.Metadata.Retry.Max = 0
	if c, err := sarama.NewClient(k.Brokers(), cfg); err == nil {
		c.Close()
		t.Fatal("private broker still reachable after Stop")
	}
	k.Start(t)
	if err := ping(); err != nil {
		t.Fatalf("private broker not reachable after restart: %v", err)
	}
}
