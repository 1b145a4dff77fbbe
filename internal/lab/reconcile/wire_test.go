package reconcile

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// The wire is read partition by partition: a copy of an event already seen
// is a duplicate of the partition that holds the copy, and a new event of a
// key whose sequence goes back is out of order in its partition.
func TestReadWireCountsPerPartition(t *testing.T) {
	t.Parallel()
	topic := testenv.NewTopic(t, 2)
	cfg := broker.ProducerConfig("paylab-test")
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	producer, err := sarama.NewSyncProducer(testenv.Brokers(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	send := func(partition int32, key, id string, seq int) {
		t.Helper()
		_, _, err := producer.SendMessage(&sarama.ProducerMessage{
			Topic: topic, Partition: partition, Key: sarama.StringEncoder(key), Value: sarama.StringEncoder("{}"),
			Headers: []sarama.RecordHeader{
				{Key: []byte("ce_id"), Value: []byte(id)},
				{Key: []byte("ce_sequence"), Value: []byte(strconv.Itoa(seq))},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Partition 0: order a in order, with a copy of its first event.
	send(0, "a", "a1", 1)
	send(0, "a", "a2", 2)
	send(0, "a", "a1", 1)
	// Partition 1: order b's second event ahead of its first.
	send(1, "b", "b2", 2)
	send(1, "b", "b1", 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := ReadWire(ctx, testenv.Brokers(), topic)
	if err != nil {
		t.Fatal(err)
	}
	if w.Messages != 5 || w.Distinct != 4 || w.Duplicates != 1 || w.OutOfOrder != 1 || len(w.Partitions) != 2 {
		t.Fatalf("wire: %+v", w)
	}
	want := []PartitionWire{
		{Partition: 0, Messages: 3, Duplicates: 1, OutOfOrder: 0},
		{Partition: 1, Messages: 2, Duplicates: 0, OutOfOrder: 1},
	}
	for i, p := range w.Partitions {
		if p.Partition != want[i].Partition || p.Messages != want[i].Messages || p.Duplicates != want[i].Duplicates ||
			p.OutOfOrder != want[i].OutOfOrder || p.Leader < 0 || p.Replicas < 1 || p.InSync != p.Replicas {
			t.Errorf("partition %d: %+v, want %+v with a leader and every replica in sync", i, p, want[i])
		}
	}
	if v := (Report{Wire: &w}).Violations(); len(v) != 1 {
		t.Errorf("violations %v, want the out-of-order event", v)
	}
}
