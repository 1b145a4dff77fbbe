package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/pkg/outbox"
)

// ProduceResult is B2.
type ProduceResult struct {
	Events    int     `json:"events"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
}

// backlogEvents reads the backlog's events as the relay reads them, to send
// the very same messages.
func backlogEvents(ctx context.Context, b backlog) ([]outbox.Event, error) {
	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT event_id, aggregate_type, aggregate_id, event_type, schema_version,
		sequence, topic, payload, headers, occurred_at FROM outbox WHERE dispatched_at IS NULL ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var events []outbox.Event
	for rows.Next() {
		var (
			e       outbox.Event
			headers []byte
		)
		if err := rows.Scan(&e.ID, &e.AggregateType, &e.AggregateID, &e.Type, &e.SchemaVersion,
			&e.Sequence, &e.Topic, &e.Payload, &headers, &e.OccurredAt); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(headers, &e.Headers); err != nil {
			return nil, fmt.Errorf("headers of %s: %w", e.ID, err)
		}
		events = append(events, e)
	}
	return events, rows.Err()
}

// rawProduce is B2: a sarama producer with the relay's settings
// (broker.RelayProducerConfig: idempotent, acks from all in-sync replicas,
// one request in flight) sends the events — encoded as the relay encodes
// them, Event.ProducerMessage — to topic, fed continuously, with no
// database and no waiting between batches. The clock runs from the first
// send to the last acknowledgement.
func (e *env) rawProduce(ctx context.Context, events []outbox.Event, topic string) (ProduceResult, error) {
	res := ProduceResult{Events: len(events)}
	client, err := sarama.NewClient(e.cfg.Brokers, broker.RelayProducerConfig("paylab-bench-producer", outbox.DefaultLeaseTTL))
	if err != nil {
		return res, err
	}
	defer client.Close()
	if err := client.RefreshMetadata(topic); err != nil {
		return res, err
	}
	producer, err := sarama.NewAsyncProducerFromClient(client)
	if err != nil {
		return res, err
	}
	defer producer.Close()
	msgs := make([]*sarama.ProducerMessage, len(events))
	for i := range events {
		events[i].Topic = topic
		msgs[i] = events[i].ProducerMessage("/paylab/orders")
	}
	start := time.Now()
	go func() {
		for _, m := range msgs {
			select {
			case producer.Input() <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	for acked := 0; acked < len(msgs); acked++ {
		select {
		case <-producer.Successes():
		case perr := <-producer.Errors():
			return res, fmt.Errorf("producing: %w", perr.Err)
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	took := time.Since(start)
	res.Seconds, res.PerSecond = took.Seconds(), perSecond(len(msgs), took)
	return res, nil
}
