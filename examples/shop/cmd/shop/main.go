// Command shop runs the example shop: the checkout API, the outbox relay
// and the fulfilment consumer, against DATABASE_URL and KAFKA_BROKERS.
//
//	DATABASE_URL=postgres://… KAFKA_BROKERS=127.0.0.1:59092 go run ./cmd/shop
//	curl -X POST 'localhost:8090/carts/cart-1/checkout?total_cents=1999'
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"example.com/shop"
	"github.com/paylab/paylab/pkg/inbox"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, log); err != nil {
		log.Error("shop failed", "error", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger) error {
	dbURL, brokers := os.Getenv("DATABASE_URL"), os.Getenv("KAFKA_BROKERS")
	addr := os.Getenv("SHOP_ADDR")
	if addr == "" {
		addr = "127.0.0.1:8090"
	}
	if dbURL == "" || brokers == "" {
		return errors.New("DATABASE_URL and KAFKA_BROKERS must be set")
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("connecting to the database: %w", err)
	}
	defer pool.Close()
	if err := shop.Migrate(ctx, pool); err != nil {
		return err
	}

	carts, err := shop.NewCarts(pool, shop.TopicCartEvents)
	if err != nil {
		return err
	}
	producer, err := sarama.NewAsyncProducer(strings.Split(brokers, ","), shop.ProducerConfig())
	if err != nil {
		return fmt.Errorf("starting the producer: %w", err)
	}
	relay, pub, err := shop.NewRelay(pool, producer, log)
	if err != nil {
		return err
	}
	defer pub.Close()
	runner, err := inbox.NewRunner(pool, shop.FulfilmentConfig(strings.Split(brokers, ","), shop.TopicCartEvents, "shop-fulfilment", log))
	if err != nil {
		return err
	}

	srv := &http.Server{Addr: addr, Handler: carts.Routes(), ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return relay.Run(gctx) })
	g.Go(func() error { return runner.Run(gctx) })
	g.Go(func() error {
		log.InfoContext(gctx, "shop listening", "addr", addr)
		if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(gctx), 10*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	return g.Wait()
}
