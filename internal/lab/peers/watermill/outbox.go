package main

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Watermill's outbox as its documentation sets it up: the default
// PostgreSQL schema and offsets adapters, the forwarder's envelope on top of
// the SQL publisher.

// subscriberConfig is the forwarder's SQL subscriber: Watermill's defaults
// (batches of 100, 1 s poll interval, 30 s ack deadline), creating its
// tables on subscribe.
func subscriberConfig() sql.SubscriberConfig {
	return sql.SubscriberConfig{
		SchemaAdapter:    sql.DefaultPostgreSQLSchema{},
		OffsetsAdapter:   sql.DefaultPostgreSQLOffsetsAdapter{},
		InitializeSchema: true,
	}
}

// initSchema creates Watermill's tables for forwarderTopic (messages and
// offsets) unless they exist. The publisher cannot: it refuses to create
// tables inside a transaction, which would commit it.
func initSchema(pool *pgxpool.Pool, forwarderTopic string, logger watermill.LoggerAdapter) error {
	sub, err := sql.NewSubscriber(sql.BeginnerFromPgx(pool), subscriberConfig(), logger)
	if err != nil {
		return err
	}
	defer sub.Close()
	if err := sub.SubscribeInitialize(forwarderTopic); err != nil {
		return fmt.Errorf("creating Watermill's tables for %s: %w", forwarderTopic, err)
	}
	return nil
}

// publishInTx runs fn and publishes msgs for topic in one transaction on
// pool: the messages go, enveloped for the forwarder, into Watermill's table
// through a SQL publisher on the transaction, and are visible to the
// forwarder only once it commits.
func publishInTx(ctx context.Context, pool *pgxpool.Pool, forwarderTopic, topic string, logger watermill.LoggerAdapter,
	fn func(pgx.Tx) error, msgs ...*message.Message) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if fn != nil {
			if err := fn(tx); err != nil {
				return err
			}
		}
		sqlPub, err := sql.NewPublisher(sql.TxFromPgx(tx), sql.PublisherConfig{SchemaAdapter: sql.DefaultPostgreSQLSchema{}}, logger)
		if err != nil {
			return err
		}
		pub := forwarder.NewPublisher(sqlPub, forwarder.PublisherConfig{ForwarderTopic: forwarderTopic})
		if err := pub.Publish(topic, msgs...); err != nil {
			return fmt.Errorf("publishing %d messages: %w", len(msgs), err)
		}
		return pub.Close()
	})
}
