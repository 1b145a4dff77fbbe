package outbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// acks collects a batch's acknowledgements: route records each message's
// result, and the batch's goroutine wakes once, when the last one is in,
// instead of once per message.
type acks struct {
	mu        sync.Mutex
	errs      []error
	done      []bool
	left      int           // results still expected
	all       chan struct{} // closed when left reaches 0
	abandoned bool          // the batch stopped waiting: results are dropped
}

func newAcks(n int) *acks {
	a := &acks{errs: make([]error, n), done: make([]bool, n), left: n, all: make(chan struct{})}
	if n == 0 {
		close(a.all)
	}
	return a
}

// set records message i's result.
func (a *acks) set(i int, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.abandoned || a.done[i] {
		return
	}
	a.errs[i], a.done[i] = err, true
	if a.left--; a.left == 0 {
		close(a.all)
	}
}

// ticket travels in a message's Metadata to find its batch again.
type ticket struct {
	index int
	acks  *acks
}

// route hands every success and error to the batch that sent the message.
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
			if t, ok := m.Metadata.(*ticket); ok {
				t.acks.set(t.index, nil)
			}
		case pe, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			if t, ok := pe.Msg.Metadata.(*ticket); ok {
				t.acks.set(t.index, classify(pe.Err))
			}
		}
	}
}

// Publish sends events and waits for all their acks or for ctx to end.
// A batch that stopped waiting drops the acks still to come.
func (p *KafkaPublisher) Publish(ctx context.Context, events []Event) []error {
	a := newAcks(len(events))
	msgs := p.encode(events, a)
send:
	for i := range msgs {
		select {
		case p.producer.Input() <- &msgs[i]:
		case <-ctx.Done():
			for j := i; j < len(events); j++ {
				a.set(j, fmt.Errorf("not sent: %w", ctx.Err()))
			}
			break send
		}
	}
	select {
	case <-a.all:
	case <-ctx.Done():
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.abandoned = true
	failed := false
	for i := range a.errs {
		if !a.done[i] {
			a.errs[i] = fmt.Errorf("waiting for the broker's ack: %w", ctx.Err())
		}
		failed = failed || a.errs[i] != nil
	}
	if !failed {
		return nil
	}
	return a.errs
}

// encode builds the batch's messages (producerMessages), each with the
// ticket that finds a, its batch, again.
func (p *KafkaPublisher) encode(events []Event, a *acks) []sarama.ProducerMessage {
	msgs := producerMessages(events, p.source)
	tickets := make([]ticket, len(events))
	for i := range msgs {
		tickets[i] = ticket{index: i, acks: a}
		msgs[i].Metadata = &tickets[i]
	}
	return msgs
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
