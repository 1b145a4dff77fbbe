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
	Messages   int             `json:"messages"`
	Distinct   int             `json:"distinct_events"`
	Duplicates int             `json:"duplicates"`   // messages − distinct event ids
	OutOfOrder int             `json:"out_of_order"` // a key's sequence going backwards to an unseen event
	Partitions []PartitionWire `json:"partitions"`
}

// PartitionWire is one partition's share of the wire, and the broker that
// leads it now: on a cluster, duplicates and order are counted per
// partition whichever broker led it when the messages were written.
type PartitionWire struct {
	Partition  int32 `json:"partition"`
	Leader     int32 `json:"leader"` // broker id; -1 without a leader
	Replicas   int   `json:"replicas"`
	InSync     int   `json:"in_sync"`
	Messages   int   `json:"messages"`
	Duplicates int   `json:"duplicates"` // copies of an event seen before
	OutOfOrder int   `json:"out_of_order"`
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
		pw := PartitionWire{Partition: p, Leader: -1}
		if leader, err := client.Leader(topic, p); err == nil {
			pw.Leader = leader.ID()
		}
		if replicas, err := client.Replicas(topic, p); err == nil {
			pw.Replicas = len(replicas)
		}
		if isr, err := client.InSyncReplicas(topic, p); err == nil {
			pw.InSync = len(isr)
		}
		end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			return w, err
		}
		start, err := client.GetOffset(topic, p, sarama.OffsetOldest)
		if err != nil {
			return w, err
		}
		if end <= start {
			w.Partitions = append(w.Partitions, pw)
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
				pw.Messages++
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
					pw.Duplicates++
					continue
				}
				seen[id] = true
				if seq < last[string(msg.Key)] {
					w.OutOfOrder++
					pw.OutOfOrder++
				}
				last[string(msg.Key)] = max(last[string(msg.Key)], seq)
			}
		}
		pc.Close()
		w.Partitions = append(w.Partitions, pw)
	}
	w.Distinct = len(seen)
	w.Duplicates = w.Messages - w.Distinct
	return w, nil
}
