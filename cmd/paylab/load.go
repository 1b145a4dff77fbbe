package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/paylab/paylab/internal/lab/loadgen"
)

// runLoad: paylab load [--url U] [--rate R] [--count N] [--seed S]
// [--acknowledged FILE] [--json], with the API key in PAYLAB_API_KEY (every
// payment is its merchant's)
func runLoad(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(out)
	cfg := loadgen.Config{}
	fs.StringVar(&cfg.BaseURL, "url", "http://127.0.0.1:8080", "orders API base URL")
	fs.IntVar(&cfg.Rate, "rate", 100, "payments per second (constant arrival rate)")
	fs.IntVar(&cfg.Count, "count", 1000, "payments in all")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of customers, merchants, amounts and currencies")
	fs.DurationVar(&cfg.Timeout, "timeout", 10*time.Second, "per-request timeout")
	ackFile := fs.String("acknowledged", "", "append the id of every order the API acknowledged (201) to this file, one a line, for paylab verify --acknowledged")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	cfg.Keys.Default = os.Getenv("PAYLAB_API_KEY")
	if cfg.Keys.Default == "" {
		return errors.New("load: PAYLAB_API_KEY must hold a merchant's API key (paylab init prints the demo key; paylab keys create makes one)")
	}
	var ack *loadgen.Acknowledged
	if *ackFile != "" {
		f, err := os.OpenFile(*ackFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("load: the acknowledged orders' file: %w", err)
		}
		defer f.Close()
		ack = loadgen.NewAcknowledged(f)
		cfg.OnCreated = ack.Add
	}
	rep, err := loadgen.Run(ctx, cfg)
	if ack != nil {
		if ferr := ack.Flush(); ferr != nil {
			return fmt.Errorf("load: writing %s: %w", *ackFile, ferr)
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(out, "POST %s/v1/payments at %d/s, seed %d\n%s", cfg.BaseURL, cfg.Rate, cfg.Seed, rep)
	return err
}
