package inbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Headers added to a dead-lettered message, next to all of its original
// headers. The key and value are the original message's.
const (
	HeaderDLQReason            = "dlq_reason" // one of the Reason… constants
	HeaderDLQError             = "dlq_error"  // the last error, as text
	HeaderDLQOriginalTopic     = "dlq_original_topic"
	HeaderDLQOriginalPartition = "dlq_original_partition"
	HeaderDLQOriginalOffset    = "dlq_original_offset"
	HeaderDLQConsumerGroup     = "dlq_consumer_group"
)

type deadLetterProducer struct {
	producer sarama.SyncProducer
	topic    string
	group    string
}

func (d *deadLetterProducer) send(_ context.Context, msg Message, reason string, cause error) error {
	headers := make([]sarama.RecordHeader, 0, len(msg.Headers)+6)
	add := func(k, v string) { headers = append(headers, sarama.RecordHeader{Key: []byte(k), Value: []byte(v)}) }
	for k, v := range msg.Headers {
		add(k, v)
	}
	add(HeaderDLQReason, reason)
	if cause != nil {
		add(HeaderDLQError, cause.Error())
	}
	add(HeaderDLQOriginalTopic, msg.Topic)
	add(HeaderDLQOriginalPartition, strconv.FormatInt(int64(msg.Partition), 10))
	add(HeaderDLQOriginalOffset, strconv.FormatInt(msg.Offset, 10))
	add(HeaderDLQConsumerGroup, d.group)
	pm := &sarama.ProducerMessage{Topic: d.topic, Value: sarama.ByteEncoder(msg.Data), Headers: headers}
	if msg.Subject != "" {
		pm.Key = sarama.StringEncoder(msg.Subject)
	}
	if _, _, err := d.producer.SendMessage(pm); err != nil {
		return fmt.Errorf("dead-lettering %s/%d/%d to %s: %w", msg.Topic, msg.Partition, msg.Offset, d.topic, err)
	}
	return nil
}

// deadLetter records the event as failed in the inbox (when it has an id and
// the inbox is on) and publishes it to the dead-letter topic, in that
// transaction: a crash in between re-delivers it and may dead-letter it twice,
// never zero times. An event already failed or processed is a duplicate.
func (e *engine) deadLetter(ctx context.Context, msg Message, reason string, cause error, attempts int) (Outcome, error) {
	backoff := e.cfg.RetryBackoff
	for {
		duplicate := false
		err := withTx(ctx, e.pool, func(tx pgx.Tx) error {
			if !e.cfg.Unsafe.Disabled && msg.ID != uuid.Nil {
				q := e.queries(tx)
				status, err := q.Status(ctx, msg.ID)
				switch {
				case err == nil && status != "received":
					duplicate = true
					return nil
				case err != nil && !errors.Is(err, pgx.ErrNoRows):
					return fmt.Errorf("reading status of %s: %w", msg.ID, err)
				}
				p := failedParams(msg, attempts, cause)
				if err := q.RecordFailed(ctx, p); err != nil {
					return fmt.Errorf("recording %s failed: %w", msg.ID, err)
				}
			}
			if e.dlq == nil {
				return nil
			}
			return e.dlq(ctx, msg, reason, cause)
		})
		if err == nil {
			if duplicate {
				e.count(msg, Duplicate)
				return Duplicate, nil
			}
			if e.dlq == nil { // a failed re-drive: the event is failed again, not re-published
				e.log.ErrorContext(ctx, "event failed again", "event_id", msg.ID, "type", msg.Type, "reason", reason, "error", cause)
				return DeadLettered, nil
			}
			e.m.deadLettered.WithLabelValues(reason).Inc()
			e.log.ErrorContext(ctx, "event dead-lettered", "event_id", msg.ID, "type", msg.Type, "reason", reason,
				"topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset, "error", cause)
			return DeadLettered, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		e.log.WarnContext(ctx, "dead-lettering failed; retrying", "event_id", msg.ID, "error", err)
		if err := sleep(ctx, backoff); err != nil {
			return "", err
		}
		backoff = min(2*backoff, e.cfg.RetryMaxBackoff)
	}
}
