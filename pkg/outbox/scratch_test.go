package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/paylab/paylab/internal/testenv"
	"github.com/paylab/paylab/pkg/outbox/internal/outboxdb"
)

func TestScratch(t *testing.T) {
	pool, _ := testenv.NewPool(t, "orders")
	topic := testenv.NewTopic(t, 6)
	ctx := longContext(t, 5*time.Minute)
	pool.Config().MaxConns = 1
	conn, _ := pool.Acquire(ctx)
	defer conn.Release()
	q := outboxdb.New(conn)
	for i := 0; i < 8; i++ {
		q.ClaimBatch(ctx, outboxdb.ClaimBatchParams{Owner: "x", LeaseSeconds: 30, BatchSize: 200})
	}
	seedOrders(t, ctx, pool, topic, 1000, 10)
	s := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	rows, err := q.ClaimBatch(cctx, outboxdb.ClaimBatchParams{Owner: "x", LeaseSeconds: 30, BatchSize: 200})
	t.Logf("cached plan: %d rows, %v, %v", len(rows), err, time.Since(s))
	conn2, _ := pool.Acquire(ctx)
	defer conn2.Release()
	s = time.Now()
	rows, err = outboxdb.New(conn2).ClaimBatch(ctx, outboxdb.ClaimBatchParams{Owner: "y", LeaseSeconds: 30, BatchSize: 200})
	t.Logf("fresh conn: %d rows, %v, %v", len(rows), err, time.Since(s))
}
