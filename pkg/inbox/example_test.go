package inbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/pkg/inbox"
)

// Consume order events into the ledger's database: the entry and the inbox
// mark commit together, so a redelivered event changes nothing.
func ExampleRunner() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, "postgres://ledger:ledger@127.0.0.1:55432/ledger")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	onCaptured := func(ctx context.Context, tx pgx.Tx, msg inbox.Message) error {
		var c struct {
			OrderID string `json:"order_id"`
			Amount  int64  `json:"amount"`
		}
		if err := json.Unmarshal(msg.Data, &c); err != nil {
			return inbox.Permanent(err) // dead-letter it, retrying cannot help
		}
		_, err := tx.Exec(ctx, "INSERT INTO captures (order_id, amount) VALUES ($1, $2)", c.OrderID, c.Amount)
		return err // any other error is retried, then dead-lettered
	}

	runner, err := inbox.NewRunner(pool, inbox.Config{
		Brokers:  []string{"127.0.0.1:59092"},
		Topic:    "order-events",
		Group:    "ledger",
		Handlers: map[string]inbox.Handler{"OrderCaptured": onCaptured},
		Logger:   slog.Default(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := runner.Run(ctx); err != nil { // blocks until ctx ends
		fmt.Println(err)
	}
}

// Re-process an event the inbox marked failed, after fixing its cause.
func ExampleRedrive() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://ledger:ledger@127.0.0.1:55432/ledger")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	handlers := map[string]inbox.Handler{
		"OrderCaptured": func(ctx context.Context, tx pgx.Tx, msg inbox.Message) error { return nil },
	}
	var eventID [16]byte // the failed event's id, from the inbox or the dead letter's ce_id
	outcome, err := inbox.Redrive(ctx, pool, inbox.Config{Handlers: handlers}, eventID)
	fmt.Println(outcome, err)
}

// A consumer with tables of its own names: Migrate creates shop_inbox and
// shop_inbox_sequences (a no-op once they exist; a service with a migration
// tool of its own takes the SQL from Migrations instead), and the Runner
// records, dedupes and orders with them, its metrics named shop_inbox_*.
func ExampleMigrate() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, "postgres://shop:shop@127.0.0.1:55432/shop")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	cfg := inbox.Config{
		Table:   "shop_inbox",
		Brokers: []string{"127.0.0.1:59092"},
		Topic:   "cart-events",
		Group:   "shop-fulfilment",
		Handlers: map[string]inbox.Handler{
			"CartCheckedOut": func(ctx context.Context, tx pgx.Tx, msg inbox.Message) error {
				_, err := tx.Exec(ctx, "INSERT INTO shipments (cart_id) VALUES ($1)", msg.Subject)
				return err
			},
		},
	}
	if err := inbox.Migrate(ctx, pool, cfg); err != nil {
		fmt.Println(err)
		return
	}
	runner, err := inbox.NewRunner(pool, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := runner.Run(ctx); err != nil {
		fmt.Println(err)
	}
}

// The schema for a migration tool of one's own: one file per version.
func ExampleMigrations() {
	ms, err := inbox.Migrations("shop_inbox")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range ms {
		fmt.Printf("%05d_%s.sql\n", m.Version, m.Name)
	}
	// Output:
	// 00001_inbox.sql
}
