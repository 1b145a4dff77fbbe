// Package syncpub publishes messages to Kafka synchronously with a sarama
// SyncProducer. Only the naive modes of the orders API use it: they write to
// Kafka from the request, which is exactly what the outbox avoids.
package syncpub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/paylab/paylab/internal/platform/broker"
)

// Publisher is a SyncProducer created on first use, so that the API starts
// (and shows the dual-write hole) while the broker is unreachable; creation
// is retried on the next publish after a failure.
type Publisher struct {
	brokers []string
	cfg     *sarama.Config

	mu       sync.Mutex
	producer sarama.SyncProducer
	closed   bool
}

// New returns a publisher for brokers. The producer is paylab's idempotent
// producer (broker.ProducerConfig) with timeouts short enough to answer an
// HTTP request.
func New(brokers []string, clientID string) *Publisher {
	cfg := broker.ProducerConfig(clientID)
	cfg.Net.DialTimeout = 3 * time.Second
	cfg.Net.ReadTimeout = 5 * time.Second
	cfg.Net.WriteTimeout = 5 * time.Second
	cfg.Producer.Timeout = 5 * time.Second
	cfg.Metadata.Retry.Max = 2
	return &Publisher{brokers: brokers, cfg: cfg}
}

// Publish sends msgs and returns when the broker has acknowledged all of
// them. sarama's producer does not take a context; its timeouts bound the
// call.
func (p *Publisher) Publish(_ context.Context, msgs []*sarama.ProducerMessage) error {
	prod, err := p.get()
	if err != nil {
		return err
	}
	if err := prod.SendMessages(msgs); err != nil {
		return fmt.Errorf("sending %d message(s): %w", len(msgs), err)
	}
	return nil
}

func (p *Publisher) get() (sarama.SyncProducer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("publisher is closed")
	}
	if p.producer == nil {
		prod, err := sarama.NewSyncProducer(p.brokers, p.cfg)
		if err != nil {
			return nil, fmt.Errorf("connecting to Kafka at %v: %w", p.brokers, err)
		}
		p.producer = prod
	}
	return p.producer, nil
}

// Close closes the producer, if one was created.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.producer == nil {
		return nil
	}
	return p.producer.Close()
}
