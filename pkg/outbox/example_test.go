package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/pkg/outbox"
)

// Capture an order and record its event in one transaction: both commit or
// neither does. A relay publishes the event after the commit.
func ExampleEnqueue() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://orders:orders@127.0.0.1:55432/orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	orderID := "0193a5c2-7f3e-7b1a-9c1d-3e5f7a9b1c2d"
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "UPDATE orders SET status = 'captured' WHERE id = $1", orderID); err != nil {
			return err
		}
		payload, _ := json.Marshal(map[string]any{"order_id": orderID, "amount": 1999, "currency": "EUR"})
		return outbox.Enqueue(ctx, tx, outbox.Event{
			AggregateType: "order",
			AggregateID:   orderID,
			Type:          "OrderCaptured",
			Sequence:      1,
			Topic:         "order-events",
			Payload:       payload,
		})
	})
	if err != nil {
		fmt.Println("capture failed, nothing was recorded:", err)
	}
}
