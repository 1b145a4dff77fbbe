// Package shop is a made-up service that adopts paylab's pkg/outbox and
// pkg/inbox the way another codebase would: with tables of its own (carts,
// shipments) and its own names for the outbox and inbox tables, so that
// NOTIFY channel and metrics are its own too.
//
// Checking a cart out updates the cart and enqueues a CartCheckedOut event
// in one transaction; a relay publishes it to Kafka; the fulfilment consumer
// records one shipment per event through the inbox, so a redelivered event
// ships nothing twice.
package shop

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/pkg/inbox"
	"github.com/paylab/paylab/pkg/outbox"
)

// The shop's names for the outbox and inbox tables. The relay's NOTIFY
// channel and metrics follow the outbox table (shop_outbox, shop_outbox_*),
// the inbox's metrics the inbox table (shop_inbox_*).
const (
	OutboxTable = "shop_outbox"
	InboxTable  = "shop_inbox"
)

// Event types and their topic.
const (
	TypeCartCheckedOut = "CartCheckedOut"
	TopicCartEvents    = "shop.cart-events"
)

// schema is the shop's own tables. A real service would keep them in its
// migration tool, next to the outbox's and inbox's (outbox.Migrations,
// inbox.Migrations); this one has none, so Migrate applies everything.
const schema = `
CREATE TABLE IF NOT EXISTS carts (
    id          text        PRIMARY KEY,
    status      text        NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'checked_out')),
    total_cents bigint      NOT NULL DEFAULT 0,
    event_seq   bigint      NOT NULL DEFAULT 0, -- the sequence of the cart's last event
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS shipments (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    cart_id    text        NOT NULL, -- deliberately not unique: the inbox dedupes
    event_id   uuid        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);`

// Migrate creates the shop's tables and, with the packages' own migrations,
// its outbox and inbox tables. It is idempotent.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, schema); err != nil {
		return fmt.Errorf("creating the shop's tables: %w", err)
	}
	if err := outbox.Migrate(ctx, pool, OutboxConfig()); err != nil {
		return err
	}
	return inbox.Migrate(ctx, pool, inbox.Config{Table: InboxTable})
}

// OutboxConfig is the outbox configuration the writer and the relay share.
func OutboxConfig() outbox.Config { return outbox.Config{Table: OutboxTable} }
