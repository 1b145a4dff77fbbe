package shop

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/pkg/inbox"
	"github.com/paylab/paylab/pkg/outbox"
)

// NewRelay returns the relay that publishes the shop's outbox to Kafka with
// producer (idempotent, acks from all in-sync replicas, successes and errors
// returned; see ProducerConfig).
func NewRelay(pool *pgxpool.Pool, producer sarama.AsyncProducer, log *slog.Logger) (*outbox.Relay, *outbox.KafkaPublisher, error) {
	pub := outbox.NewKafkaPublisher(producer, "/shop/carts")
	cfg := OutboxConfig().RelayConfig()
	cfg.Logger = log
	relay, err := outbox.NewRelay(pool, pub, cfg)
	if err != nil {
		pub.Close()
		return nil, nil, err
	}
	return relay, pub, nil
}

// ProducerConfig is a producer configuration fit for the relay (its sends
// bounded by the relay's default lease).
func ProducerConfig() *sarama.Config {
	c := outbox.KafkaProducerConfig(outbox.DefaultLeaseTTL)
	c.Version = sarama.V3_0_0_0
	c.ClientID = "shop-relay"
	return c
}

// FulfilmentConfig is the inbox configuration of the fulfilment consumer:
// each CartCheckedOut event becomes one shipment, written in the
// transaction that records the event in shop_inbox.
func FulfilmentConfig(brokers []string, topic, group string, log *slog.Logger) inbox.Config {
	return inbox.Config{
		Table:    InboxTable,
		Brokers:  brokers,
		Topic:    topic,
		Group:    group,
		Handlers: map[string]inbox.Handler{TypeCartCheckedOut: ship},
		Logger:   log,
	}
}

func ship(ctx context.Context, tx pgx.Tx, msg inbox.Message) error {
	var c CheckedOut
	if err := json.Unmarshal(msg.Data, &c); err != nil {
		return inbox.Permanent(err) // retrying cannot help: dead-letter it
	}
	if c.CartID == "" {
		return inbox.Permanent(errors.New("event without a cart id"))
	}
	_, err := tx.Exec(ctx, "INSERT INTO shipments (cart_id, event_id) VALUES ($1, $2)", c.CartID, msg.ID)
	return err
}
