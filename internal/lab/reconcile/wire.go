package reconcile

import (
	"context"
	"fmt"
	"strconv"

	"github.com/IBM/sarama"

	"github.com/paylab/paylab/internal/platform/broker"
)

// Wire is what the topic holds.
type Wire struct {
	Messages   int `json:"messages"`
	Distinct   int `json:"distinct_events"`
	Duplicates int `json:"duplicates"`   // messages − distinct event ids
	OutOfOrder int `json:"out_of_order"` // a key's sequence going backwards to an unseen event
}

// ReadWire reads every partition of topic up to its current end and counts
// messages, distinct CloudEvents ids, and per-key sequence regressions (a
// redelivered duplicate going back is not a regression; a new event with a
// lower sequence than one already seen is).
func ReadWire(ctx context.Context, brokers []string, topic string) (Wire, error) {
	var w Wire
	client, err := sarama.NewClient(brokers, broker.Config("paylab-verify"))
	if err != nil {
		return w, fmt.Errorf("connecting to Kafka: %w", err)
	}
	defer client.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return w, err
	}
	defer consumer.Close()
	partitions, err := client.Partitions(topic)
	if err != nil {
		return w, fmt.Errorf("partitions of %s: %w", topic, err)
	}
	seen := map[string]bool{}
	for _, p := range partitions {
		end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			return w, err
		}
		start, err := client.GetOffset(topic, p, sarama.OffsetOldest)
		if err != nil {
			return w, err
		}
		if end <= start {
			continue
		}
		pc, err := consumer.ConsumePartition(topic, p, start)
		if err != nil {
			return w, err
		}
		last := map[string]int64{}
		for offset := start; offset < end; {
			select {
			case <-ctx.Done():
				pc.Close()
				return w, ctx.Err()
			case msg := <-pc.Messages():
				offset = msg.Offset + 1
				w.Messages++
				var id string
				var seq int64
				for _, h := range msg.Headers {
					switch string(h.Key) {
					case "ce_id":
						id = string(h.Value)
					case "ce_sequence":
						seq, _ = strconv.ParseInt(string(h.Value), 10, 64)
					}
				}
				if seen[id] {
					continue
				}
				seen[id] = true
				if seq < last[string(msg.Key)] {
					w.OutOfOrder++
				}
				last[string(msg.Key)] = max(last[string(msg.Key)], seq)
			}
		}
		pc.Close()
	}
	w.Distinct = len(seen)
	w.Duplicates = w.Messages - w.Distinct
	return w, nil
}
