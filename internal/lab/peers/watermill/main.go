// Command watermill-peer is Watermill's outbox, measured by paylab's bench
// (internal/lab/bench) as the contender a user would pick instead of
// pkg/outbox: a message written with forwarder.NewPublisher over
// watermill-sql's PostgreSQL publisher inside the caller's transaction, and
// the components/forwarder Forwarder moving it from Watermill's table to
// Kafka through watermill-kafka.
//
// It is its own module so that Watermill never enters paylab's go.mod. Each
// subcommand prints one JSON object on stdout when it is done; logs go to
// stderr.
//
//	watermill-peer capture -db URL -workers N -duration D -warmup W -update-sql SQL -ids-sql SQL -payload-file F -topic T
//	watermill-peer seed    -db URL -n N -per-tx K -payload-file F -topic T
//	watermill-peer drain   -db URL -brokers B -topic T -n N -timeout D
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// defaultForwarderTopic names the Watermill topic (the SQL table
// watermill_<topic>) the seed and capture write to and the drain reads.
const defaultForwarderTopic = "paylab_forwarder"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "watermill-peer:", err)
		os.Exit(1)
	}
}

const usage = "usage: watermill-peer capture|seed|drain [flags] (-h for a subcommand's flags)"

// run runs the subcommand in args and writes its result to stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	var result any
	var do func() error
	switch args[0] {
	case "capture":
		var c captureConfig
		var payloadFile string
		fs.StringVar(&c.DB, "db", "", "PostgreSQL URL")
		fs.IntVar(&c.Workers, "workers", 8, "closed-loop workers, one connection each")
		fs.DurationVar(&c.Duration, "duration", 10*time.Second, "measured window")
		fs.DurationVar(&c.Warmup, "warmup", 2*time.Second, "unmeasured start")
		fs.IntVar(&c.MinOps, "min-ops", 0, "the window lasts until this many transactions completed in it")
		fs.StringVar(&c.UpdateSQL, "update-sql", "", "statement run first in each transaction, $1 = an order id")
		fs.StringVar(&c.IDsSQL, "ids-sql", "", "query returning the order ids, shared round-robin among the workers")
		fs.StringVar(&payloadFile, "payload-file", "", "JSON file: {\"value\": …, \"headers\": {…}}")
		fs.StringVar(&c.Topic, "topic", "", "Kafka topic the messages are for")
		fs.StringVar(&c.ForwarderTopic, "forwarder-topic", defaultForwarderTopic, "Watermill topic of the forwarder (SQL table watermill_<topic>)")
		do = func() (err error) {
			if c.Payload, err = readPayload(payloadFile); err != nil {
				return err
			}
			result, err = capture(ctx, log, c)
			return err
		}
	case "seed":
		var c seedConfig
		var payloadFile string
		fs.StringVar(&c.DB, "db", "", "PostgreSQL URL")
		fs.IntVar(&c.N, "n", 0, "messages")
		fs.IntVar(&c.PerTx, "per-tx", 1000, "messages per transaction")
		fs.StringVar(&payloadFile, "payload-file", "", "JSON file: {\"value\": …, \"headers\": {…}}")
		fs.StringVar(&c.Topic, "topic", "", "Kafka topic the messages are for")
		fs.StringVar(&c.ForwarderTopic, "forwarder-topic", defaultForwarderTopic, "Watermill topic of the forwarder (SQL table watermill_<topic>)")
		do = func() (err error) {
			if c.Payload, err = readPayload(payloadFile); err != nil {
				return err
			}
			result, err = seed(ctx, log, c)
			return err
		}
	case "drain":
		var c drainConfig
		var brokers string
		fs.StringVar(&c.DB, "db", "", "PostgreSQL URL")
		fs.StringVar(&brokers, "brokers", "", "Kafka bootstrap servers, comma-separated")
		fs.StringVar(&c.Topic, "topic", "", "Kafka topic whose records are counted")
		fs.IntVar(&c.N, "n", 0, "records to wait for")
		fs.DurationVar(&c.Timeout, "timeout", 10*time.Minute, "give up after")
		fs.StringVar(&c.ForwarderTopic, "forwarder-topic", defaultForwarderTopic, "Watermill topic of the forwarder (SQL table watermill_<topic>)")
		do = func() (err error) {
			c.Brokers = splitBrokers(brokers)
			result, err = drain(ctx, log, c)
			return err
		}
	default:
		return fmt.Errorf("unknown subcommand %q; %s", args[0], usage)
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q", args[0], fs.Args())
	}
	if err := do(); err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	return json.NewEncoder(stdout).Encode(result)
}

func splitBrokers(list string) []string {
	var out []string
	for _, b := range strings.Split(list, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}
