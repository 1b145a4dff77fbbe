package outbox

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero Config: %v", err)
	}
	tests := []struct {
		name string
		cfg  Config
	}{
		{"batch too large", Config{BatchSize: 20000}},
		{"negative batch", Config{BatchSize: -1}},
		{"lease too short", Config{LeaseTTL: time.Millisecond}},
		{"negative poll", Config{PollInterval: -time.Second}},
		{"max backoff below backoff", Config{RetryBackoff: time.Minute, RetryMaxBackoff: time.Second}},
		{"negative retention batch", Config{RetentionBatch: -5}},
		{"max publish wait below the ack budget", Config{LeaseTTL: 10 * time.Second, MaxPublishWait: time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); err == nil {
				t.Fatal("Validate succeeded")
			}
		})
	}
	if got := (Config{LeaseTTL: 10 * time.Second}).PublishTimeout(); got != 5*time.Second {
		t.Fatalf("PublishTimeout = %v, want half the TTL", got)
	}
	if got := (Config{LeaseTTL: 10 * time.Second}).withDefaults().MaxPublishWait; got != 40*time.Second {
		t.Fatalf("default MaxPublishWait = %v, want four lease TTLs", got)
	}
}

func TestClassifyPublishErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err       error
		permanent bool
	}{
		{sarama.ConfigurationError("Attempt to produce message larger than configured Producer.MaxMessageBytes"), true},
		{sarama.ErrMessageSizeTooLarge, true},
		{fmt.Errorf("wrapped: %w", sarama.ErrInvalidRecord), true},
		{sarama.ErrNotLeaderForPartition, false},
		{sarama.ErrOutOfBrokers, false},
		{errors.New("EOF"), false},
	}
	for _, tt := range tests {
		if got := errors.Is(classify(tt.err), ErrPermanent); got != tt.permanent {
			t.Errorf("classify(%v) permanent = %v, want %v", tt.err, got, tt.permanent)
		}
	}
}
