package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/paylab/paylab/internal/lab/loadgen"
	"github.com/paylab/paylab/internal/lab/reconcile"
	"github.com/paylab/paylab/internal/platform/broker"
	"github.com/paylab/paylab/internal/platform/envconfig"
)

// errViolations makes paylab exit non-zero after printing its report.
var errViolations = errors.New("guarantees violated")

// runVerify: paylab verify [--topic T] [--timeout D] [--acknowledged FILE] [--json]
func runVerify(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(out)
	topic := fs.String("topic", broker.OrderEvents, "topic to count duplicates on the wire (empty: skip)")
	timeout := fs.Duration("timeout", 60*time.Second, "longest wait for the pipeline to settle")
	quiet := fs.Duration("quiet", 3*time.Second, "how long the state must stay unchanged to count as settled")
	ackFile := fs.String("acknowledged", "", "the orders the API acknowledged (paylab load --acknowledged): report those the orders database lacks")
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
	ack, err := acknowledgedLost(ctx, cfg.OrdersURL, *ackFile)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	violations := rep.Violations()
	if ack != nil && len(ack.Lost) > 0 {
		violations = append(violations, fmt.Sprintf("%d acknowledged payments lost", len(ack.Lost)))
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			reconcile.Report
			Acknowledged *acknowledged `json:"acknowledged,omitempty"`
			Violations   []string      `json:"violations"`
		}{rep, ack, violations}); err != nil {
			return err
		}
	} else {
		printReport(out, rep, ack)
	}
	if len(violations) > 0 {
		return errViolations
	}
	return nil
}

// acknowledged is what verify found of the load generator's record of 201s.
type acknowledged struct {
	File  string   `json:"file"`
	Count int      `json:"count"`
	Lost  []string `json:"lost"` // acknowledged orders the orders database lacks
}

// acknowledgedLost reads the load generator's record of the orders the API
// acknowledged (nil without one) and looks each up in the orders database:
// one it lacks is a payment the customer was told was captured, lost, as a
// failover to an asynchronous replica loses it.
func acknowledgedLost(ctx context.Context, ordersURL, file string) (*acknowledged, error) {
	if file == "" {
		return nil, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("the acknowledged orders: %w", err)
	}
	defer f.Close()
	ids, err := loadgen.ReadAcknowledged(f)
	if err != nil {
		return nil, err
	}
	lost, err := loadgen.Missing(ctx, ordersURL, ids)
	if err != nil {
		return nil, err
	}
	return &acknowledged{File: file, Count: len(ids), Lost: lost}, nil
}

func printReport(out io.Writer, r reconcile.Report, ack *acknowledged) {
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
	v := r.Violations()
	if ack != nil {
		fmt.Fprintf(out, "acknowledged (201) by the API: %d orders in %s, %d of them not in the orders database\n", ack.Count, ack.File, len(ack.Lost))
		if len(ack.Lost) > 0 {
			v = append(v, fmt.Sprintf("%d acknowledged payments lost: %s", len(ack.Lost), strings.Join(head(ack.Lost, 10), ", ")))
		}
	}
	if len(v) > 0 {
		fmt.Fprintf(out, "\nVIOLATIONS:\n  %s\n", strings.Join(v, "\n  "))
	} else {
		fmt.Fprintln(out, "\nOK: every committed capture and refund was applied exactly once")
	}
}

// head is the first n of ids, with an ellipsis for the rest.
func head(ids []string, n int) []string {
	if len(ids) <= n {
		return ids
	}
	return append(ids[:n:n], fmt.Sprintf("… %d more", len(ids)-n))
}
