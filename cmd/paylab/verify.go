package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/paylab/paylab/internal/lab/reconcile"
	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/envconfig"
)

// errViolations makes paylab exit non-zero after printing its report.
var errViolations = errors.New("guarantees violated")

// runVerify: paylab verify [--topic T] [--timeout D] [--json]
func runVerify(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(out)
	topic := fs.String("topic", broker.OrderEvents, "topic to count duplicates on the wire (empty: skip)")
	timeout := fs.Duration("timeout", 60*time.Second, "longest wait for the pipeline to settle")
	quiet := fs.Duration("quiet", 3*time.Second, "how long the state must stay unchanged to count as settled")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	cfg, err := envconfig.Load(nil, reconcile.Config{}, nil)
	if err != nil {
		return err
	}
	rep, err := reconcile.Settle(ctx, cfg.Sources(*topic), *timeout, *quiet)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			reconcile.Report
			Violations []string `json:"violations"`
		}{rep, rep.Violations()}); err != nil {
			return err
		}
	} else {
		printReport(out, rep)
	}
	if len(rep.Violations()) > 0 {
		return errViolations
	}
	return nil
}

func printReport(out io.Writer, r reconcile.Report) {
	fmt.Fprintf(out, "committed in orders: %d captures, %d refunds\n\n", r.Captures, r.Refunds)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "consumer\texpected\tapplied\tlost\tphantom\tduplicate\tout of order\t")
	for _, row := range []struct {
		name string
		e    reconcile.Effects
	}{{"ledger", r.Ledger}, {"notifications", r.Notifications}} {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", row.name, row.e.Expected, row.e.Applied, row.e.Lost, row.e.Phantom, row.e.Duplicate, row.e.OutOfOrder)
	}
	tw.Flush()
	if r.Wire != nil {
		fmt.Fprintf(out, "\ntopic: %d messages, %d distinct events, %d duplicates on the wire (%d absorbed by the inbox), %d out of order\n",
			r.Wire.Messages, r.Wire.Distinct, r.Wire.Duplicates, r.InboxAbsorbed, r.Wire.OutOfOrder)
		fmt.Fprintln(tw, "partition\tleader\tin sync\tmessages\tduplicates\tout of order\t")
		for _, p := range r.Wire.Partitions {
			fmt.Fprintf(tw, "%d\t%d\t%d/%d\t%d\t%d\t%d\t\n", p.Partition, p.Leader, p.InSync, p.Replicas, p.Messages, p.Duplicates, p.OutOfOrder)
		}
		tw.Flush()
	}
	if len(r.Unbalanced) == 0 {
		fmt.Fprintln(out, "ledger balance: postings sum to zero in every currency")
	}
	if v := r.Violations(); len(v) > 0 {
		fmt.Fprintf(out, "\nVIOLATIONS:\n  %s\n", strings.Join(v, "\n  "))
	} else {
		fmt.Fprintln(out, "\nOK: every committed capture and refund was applied exactly once")
	}
}
