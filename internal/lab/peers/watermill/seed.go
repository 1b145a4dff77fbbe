package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// seedConfig is one backlog.
type seedConfig struct {
	DB             string
	N, PerTx       int
	Payload        payload
	Topic          string
	ForwarderTopic string
}

func (c seedConfig) validate() error {
	switch {
	case c.DB == "":
		return errors.New("no -db")
	case c.N < 1 || c.PerTx < 1:
		return errors.New("-n and -per-tx must be at least 1")
	case c.Topic == "":
		return errors.New("no -topic")
	}
	return nil
}

// seedResult is what seed prints.
type seedResult struct {
	Events  int     `json:"events"`
	Seconds float64 `json:"seconds"`
}

// seed writes a backlog of c.N messages for c.Topic through Watermill's
// transactional publisher, c.PerTx per transaction, each about an order of
// its own (a fresh UUIDv7, as paylab's order ids are), then vacuums and
// analyzes Watermill's table as paylab's bench does its outbox after a seed,
// so the drain measures the forwarder, not autovacuum catching up.
func seed(ctx context.Context, log *slog.Logger, c seedConfig) (seedResult, error) {
	res := seedResult{}
	if err := c.validate(); err != nil {
		return res, err
	}
	if c.ForwarderTopic == "" {
		c.ForwarderTopic = defaultForwarderTopic
	}
	pool, err := pgxpool.New(ctx, c.DB)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	logger := watermill.NewSlogLogger(log)
	if err := initSchema(pool, c.ForwarderTopic, logger); err != nil {
		return res, err
	}
	start := time.Now()
	for res.Events < c.N {
		msgs := make([]*message.Message, min(c.PerTx, c.N-res.Events))
		for i := range msgs {
			msgs[i] = c.Payload.message(ctx, uuid.Must(uuid.NewV7()).String())
		}
		if err := publishInTx(ctx, pool, c.ForwarderTopic, c.Topic, logger, nil, msgs...); err != nil {
			return res, fmt.Errorf("after %d of %d messages: %w", res.Events, c.N, err)
		}
		res.Events += len(msgs)
	}
	res.Seconds = time.Since(start).Seconds()
	table := sql.DefaultPostgreSQLSchema{}.MessagesTable(c.ForwarderTopic)
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE "+table); err != nil {
		return res, fmt.Errorf("vacuuming %s: %w", table, err)
	}
	log.InfoContext(ctx, "seeded", "events", res.Events, "per_tx", c.PerTx, "seconds", res.Seconds)
	return res, nil
}
