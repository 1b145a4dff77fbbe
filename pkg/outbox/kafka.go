package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// KafkaPublisher publishes events with a sarama AsyncProducer: a whole batch
// is handed to the producer at once and the acknowledgements are collected
// as they come, so a batch costs about one broker round trip per partition,
// not one per event.
//
// The producer should be idempotent with acks from all in-sync replicas and
// one request in flight per broker (KafkaProducerConfig), so sarama's own
// retries can neither duplicate nor reorder a partition's messages; it must
// return successes and errors.
type KafkaPublisher struct {
	producer sarama.AsyncProducer
	source   string
	done     chan struct{}
}

// NewKafkaPublisher returns a publisher over producer, which it owns from
// now on (Close closes it). source is the CloudEvents source of the events,
// e.g. "/shop/carts".
func NewKafkaPublisher(producer sarama.AsyncProducer, source string) *KafkaPublisher {
	p := &KafkaPublisher{producer: producer, source: source, done: make(chan struct{})}
	go p.route()
	return p
}

// KafkaProducerConfig returns a sarama configuration for a relay's
// producer: idempotent, every write acknowledged by all in-sync replicas,
// one request in flight per broker (so sarama's retries can neither
// duplicate nor reorder a partition's messages), successes and errors
// returned, and a send given up well inside the relay's publish budget
// (half of leaseTTL, the relay's LeaseTTL; zero: DefaultLeaseTTL), so an
// event another relay takes over is no longer being retried by this
// producer. Set Version to your brokers' and ClientID; the rest is
// sarama's defaults.
func KafkaProducerConfig(leaseTTL time.Duration) *sarama.Config {
	if leaseTTL <= 0 {
		leaseTTL = DefaultLeaseTTL
	}
	cfg := sarama.NewConfig()
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Timeout = min(10*time.Second, leaseTTL/4)
	return cfg
}

// ack is the result of one message, routed back to its batch.
type ack struct {
	index int
	err   error
}

// ticket travels in a message's Metadata to find its batch again.
type ticket struct {
	index   int
	results chan<- ack
}

// route hands every success and error to the batch that sent the message.
// A batch that stopped waiting still has room in its buffered channel.
func (p *KafkaPublisher) route() {
	defer close(p.done)
	successes, errs := p.producer.Successes(), p.producer.Errors()
	for successes != nil || errs != nil {
		select {
		case m, ok := <-successes:
			if !ok {
				successes = nil
				continue
			}
			if t, ok := m.Metadata.(ticket); ok {
				t.results <- ack{index: t.index}
			}
		case pe, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			if t, ok := pe.Msg.Metadata.(ticket); ok {
				t.results <- ack{index: t.index, err: classify(pe.Err)}
			}
		}
	}
}

// Publish sends events and waits for all their acks or for ctx to end.
func (p *KafkaPublisher) Publish(ctx context.Context, events []Event) []error {
	results := make(chan ack, len(events))
	errs := make([]error, len(events))
	done := make([]bool, len(events))
	sent := 0
send:
	for i := range events {
		msg := events[i].ProducerMessage(p.source)
		msg.Metadata = ticket{index: i, results: results}
		select {
		case p.producer.Input() <- msg:
			sent++
		case <-ctx.Done():
			for j := i; j < len(events); j++ {
				errs[j], done[j] = fmt.Errorf("not sent: %w", ctx.Err()), true
			}
			break send
		}
	}
	failed := sent < len(events)
	for received := 0; received < sent; received++ {
		select {
		case a := <-results:
			errs[a.index], done[a.index] = a.err, true
			failed = failed || a.err != nil
		case <-ctx.Done():
			for i := range errs {
				if !done[i] {
					errs[i] = fmt.Errorf("waiting for the broker's ack: %w", ctx.Err())
				}
			}
			return errs
		}
	}
	if !failed {
		return nil
	}
	return errs
}

// Close flushes and closes the producer.
func (p *KafkaPublisher) Close() error {
	p.producer.AsyncClose()
	<-p.done
	return nil
}

// classify marks the errors that retrying cannot fix as permanent: a
// message larger than the producer or broker accepts, or one the broker
// finds invalid.
func classify(err error) error {
	var cfgErr sarama.ConfigurationError
	var kerr sarama.KError
	switch {
	case errors.As(err, &cfgErr):
		return Permanent(err)
	case errors.As(err, &kerr):
		switch kerr {
		case sarama.ErrMessageSizeTooLarge, sarama.ErrInvalidMessage, sarama.ErrInvalidMessageSize,
			sarama.ErrInvalidRecord, sarama.ErrInvalidTopic:
			return Permanent(err)
		}
	}
	return err
}
