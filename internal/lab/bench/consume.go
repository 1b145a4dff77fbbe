package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/pkg/outbox"
)

// ConsumeResult is B3 or S3: events consumed from the backlog's topic, over
// the span from the first to the last one (the consumer group's join is not
// part of it).
type ConsumeResult struct {
	Events    int     `json:"events"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
}

func consumeResult(n int, span time.Duration) ConsumeResult {
	return ConsumeResult{Events: n, Seconds: span.Seconds(), PerSecond: perSecond(n-1, span)}
}

// rawConsume is B3: a sarama consumer group (paylab's consumer settings,
// from the oldest offset, offsets marked and auto-committed as the inbox
// runner does) reads the topic's n events and does nothing else with them.
func (e *env) rawConsume(ctx context.Context, topic string, n int) (ConsumeResult, error) {
	cfg := broker.Config("paylab-bench-consumer")
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = true
	group, err := sarama.NewConsumerGroup(e.cfg.Brokers, e.group("b3"), cfg)
	if err != nil {
		return ConsumeResult{}, err
	}
	defer group.Close()
	h := &countingHandler{want: n, done: make(chan struct{})}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	consumed := make(chan error, 1)
	go func() {
		for cctx.Err() == nil {
			if err := group.Consume(cctx, []string{topic}, h); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
				consumed <- err
				return
			}
		}
		consumed <- nil
	}()
	idle := time.After(firstEventWithin)
wait:
	for {
		select {
		case <-h.done:
			break wait
		case err := <-consumed:
			return ConsumeResult{}, fmt.Errorf("consuming %s: %w", topic, err)
		case <-idle:
			h.mu.Lock()
			got := h.count
			h.mu.Unlock()
			if got == 0 {
				return ConsumeResult{}, fmt.Errorf("no message of %s arrived in %s", topic, firstEventWithin)
			}
		case <-ctx.Done():
			return ConsumeResult{}, ctx.Err()
		}
	}
	cancel()
	<-consumed
	h.mu.Lock()
	defer h.mu.Unlock()
	return consumeResult(h.count, h.last.Sub(h.first)), nil
}

// countingHandler counts messages and notes when the first and the want-th
// arrived.
type countingHandler struct {
	mu          sync.Mutex
	want, count int
	first, last time.Time
	done        chan struct{}
}

func (h *countingHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *countingHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *countingHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case <-sess.Context().Done():
			return nil
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			sess.MarkMessage(m, "")
			h.mu.Lock()
			now := time.Now()
			if h.count == 0 {
				h.first = now
			}
			h.count++
			if h.count == h.want {
				h.last = now
				close(h.done)
			}
			h.mu.Unlock()
		}
	}
}

// firstEventWithin is how long B3 and S3 wait for their first event before
// they give up: on an empty topic they would wait for ever.
const firstEventWithin = 2 * time.Minute

// ledgerConsume is S3: the ledger (the binary, inbox on, default settings)
// consumes the topic from the start into a fresh database until it has
// applied n events, or for window after its first and at least minOps,
// whichever is first. env changes the ledger's settings (an S3 variant).
// The rate comes from the journal: entries over the span of their
// created_at (database clock), so the group's join is not part of it, and
// the same count works with the inbox off.
func (e *env) ledgerConsume(ctx context.Context, stage, topic string, n int, window time.Duration, minOps int, env ...string) (ConsumeResult, error) {
	dbURL, err := e.database(ctx, stage, "ledger")
	if err != nil {
		return ConsumeResult{}, err
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return ConsumeResult{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	ledger, err := e.ledger(ctx, stage+"-ledger", dbURL, topic, env...)
	if err != nil {
		return ConsumeResult{}, err
	}
	defer ledger.stop()
	applied := func() (int, error) {
		var c int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM journal_entries`).Scan(&c)
		return c, err
	}
	var deadline time.Time
	idle := time.Now().Add(firstEventWithin)
	for {
		c, err := applied()
		if err != nil {
			return ConsumeResult{}, err
		}
		if c > 0 && deadline.IsZero() {
			deadline = time.Now().Add(window)
		}
		if c == 0 && time.Now().After(idle) {
			return ConsumeResult{}, fmt.Errorf("the ledger applied no event of %s in %s (log: %s)", topic, firstEventWithin, ledger.LogPath)
		}
		if c >= n || (!deadline.IsZero() && time.Now().After(deadline) && c >= minOps) {
			break
		}
		select {
		case <-ctx.Done():
			return ConsumeResult{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	ledger.stop()
	var (
		count, failed int
		span          float64
	)
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM journal_entries),
			(SELECT count(*) FROM inbox WHERE status = 'failed'),
			(SELECT COALESCE(EXTRACT(EPOCH FROM max(created_at) - min(created_at)), 0)::float8 FROM journal_entries)`).Scan(&count, &failed, &span); err != nil {
		return ConsumeResult{}, err
	}
	if failed > 0 {
		return ConsumeResult{}, fmt.Errorf("the ledger dead-lettered %d events (log: %s)", failed, ledger.LogPath)
	}
	return consumeResult(count, time.Duration(span*float64(time.Second))), nil
}

// S3Variant is S3 with one thing changed: a setting of the ledger, or the
// topic's content.
type S3Variant struct {
	Name string `json:"name"`
	ConsumeResult
}

// s3Variants runs the ledger again on the S3 topic with the inbox off and
// with one event per transaction, and on a copy of the topic where every
// fifth message repeats an earlier event (the inbox skips it, so the
// journal holds each event once).
func (e *env) s3Variants(ctx context.Context, topic string, events []outbox.Event, window time.Duration, minOps int) ([]S3Variant, error) {
	n := len(events)
	withDuplicates := make([]outbox.Event, 0, n+n/4)
	for i, ev := range events {
		withDuplicates = append(withDuplicates, ev)
		if i%4 == 3 {
			withDuplicates = append(withDuplicates, events[(i*7919)%(i+1)])
		}
	}
	dupTopic, err := e.topic("s3dup")
	if err != nil {
		return nil, err
	}
	if _, err := e.rawProduce(ctx, withDuplicates, dupTopic); err != nil {
		return nil, fmt.Errorf("filling %s: %w", dupTopic, err)
	}
	var out []S3Variant
	for _, v := range []struct {
		name, stage, topic string
		env                []string
	}{
		{"inbox off", "s3off", topic, []string{"INBOX_ENABLED=false"}},
		{"inbox on, one event per transaction", "s3one", topic, []string{"INBOX_BATCH_SIZE=1"}},
		{fmt.Sprintf("inbox on, %d of %d messages repeat an earlier event", len(withDuplicates)-n, len(withDuplicates)), "s3dup", dupTopic, nil},
	} {
		r, err := e.ledgerConsume(ctx, v.stage, v.topic, n, window, minOps, v.env...)
		if err != nil {
			return out, fmt.Errorf("%s: %w", v.name, err)
		}
		out = append(out, S3Variant{Name: v.name, ConsumeResult: r})
	}
	return out, nil
}
