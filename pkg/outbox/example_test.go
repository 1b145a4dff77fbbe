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

// A service with tables of its own names: Migrate creates the outbox table
// (and is a no-op once it exists; a service with a migration tool of its own
// takes the SQL from Migrations instead), a Writer enqueues into it inside
// the business transaction, and a Relay with the same Config publishes it.
func ExampleMigrate() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://shop:shop@127.0.0.1:55432/shop")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	cfg := outbox.Config{Table: "shop_outbox"} // channel and metrics: shop_outbox, shop_outbox_*
	if err := outbox.Migrate(ctx, pool, cfg); err != nil {
		fmt.Println(err)
		return
	}
	w, err := outbox.NewWriter(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "UPDATE carts SET status = 'checked_out' WHERE id = $1", "cart-1"); err != nil {
			return err
		}
		return w.Enqueue(ctx, tx, outbox.Event{
			AggregateType: "cart",
			AggregateID:   "cart-1",
			Type:          "CartCheckedOut",
			Sequence:      1, // 0 would publish it unordered
			Topic:         "cart-events",
			Payload:       json.RawMessage(`{"cart_id":"cart-1"}`),
		})
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// outbox.NewRelay(pool, publisher, cfg) then publishes from shop_outbox.
}

// The schema for a migration tool of one's own: one file per version.
func ExampleMigrations() {
	ms, err := outbox.Migrations("shop_outbox")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range ms {
		fmt.Printf("%05d_%s.sql\n", m.Version, m.Name)
	}
	// Output:
	// 00001_outbox.sql
	// 00002_outbox_storage.sql
	// 00003_outbox_hot_claims.sql
	// 00004_outbox_unordered.sql
	// 00005_outbox_wal_reader.sql
	// 00006_outbox_wal_generation.sql
	// 00007_outbox_lean_pending.sql
	// 00008_outbox_parked.sql
}
