package inbox

import (
	"context"
	"testing"

	"github.com/IBM/sarama"
	"github.com/google/uuid"

	"github.com/paylab/paylab/pkg/inbox/internal/inboxdb"
	"github.com/paylab/paylab/pkg/inbox/internal/testenv"
)

// Micro-benchmarks of the inbox's hot paths; `paylab bench` (make bench)
// measures the ledger as a whole against a raw consumer group.
//
//	go test -run '^$' -bench . ./pkg/inbox/

// benchMessage is an OrderCaptured delivery as the relay sends it.
func benchMessage() *sarama.ConsumerMessage {
	h := func(k, v string) *sarama.RecordHeader { return &sarama.RecordHeader{Key: []byte(k), Value: []byte(v)} }
	return &sarama.ConsumerMessage{
		Topic: "order-events", Partition: 3, Offset: 12345, Key: []byte("0193a5c2-7f3e-7b1a-9c1d-3e5f7a9b1c2d"),
		Value: []byte(`{"schema_version":1,"sequence":1,"order_id":"0193a5c2-7f3e-7b1a-9c1d-3e5f7a9b1c2d","customer_id":"cus_42",` +
			`"merchant_id":"mer_7","amount":1999,"currency":"EUR","captured_at":"2026-12-02T12:00:00.123456Z"}`),
		Headers: []*sarama.RecordHeader{
			h(HeaderSpecVersion, "1.0"), h(HeaderID, uuid.NewString()), h(HeaderSource, "/paylab/orders"),
			h(HeaderType, "OrderCaptured"), h(HeaderTime, "2026-12-02T12:00:00.123456Z"),
			h(HeaderSubject, "0193a5c2-7f3e-7b1a-9c1d-3e5f7a9b1c2d"), h(HeaderSequence, "1"), h(HeaderSchemaVersion, "1"),
			h("ce_aggregatetype", "order"), h(HeaderContentType, "application/json"),
			h("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
		},
	}
}

// BenchmarkDecode: reading a delivery's CloudEvent.
func BenchmarkDecode(b *testing.B) {
	km := benchMessage()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(km); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecord: the inbox insert (RecordProcessed: INSERT … ON CONFLICT
// DO NOTHING), as a delivery's first statement, in autocommit: one new
// event, one duplicate that hits the primary key, and a batch of 500 new
// events in one statement.
func BenchmarkRecord(b *testing.B) {
	pool, _ := testenv.NewPool(b, migrate)
	q := inboxdb.New(pool)
	ctx := context.Background()
	msg, err := Decode(benchMessage())
	if err != nil {
		b.Fatal(err)
	}
	record := func(b *testing.B, msgs []Message, want int) {
		if ids, err := q.RecordProcessed(ctx, recordBatchParams(msgs)); err != nil || len(ids) != want {
			b.Fatalf("recorded %d of %d: %v", len(ids), len(msgs), err)
		}
	}
	b.Run("new", func(b *testing.B) {
		for b.Loop() {
			msg.ID = uuid.Must(uuid.NewV7())
			record(b, []Message{msg}, 1)
		}
	})
	b.Run("duplicate", func(b *testing.B) {
		if _, err := q.RecordProcessed(ctx, recordBatchParams([]Message{msg})); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			record(b, []Message{msg}, 0)
		}
	})
	b.Run("batch-500", func(b *testing.B) {
		batch := make([]Message, 500)
		for b.Loop() {
			for i := range batch {
				batch[i] = msg
				batch[i].ID = uuid.Must(uuid.NewV7())
			}
			record(b, batch, len(batch))
		}
	})
}
