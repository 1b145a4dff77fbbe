package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/paylab/paylab/internal/lab/bench"
	"github.com/paylab/paylab/internal/platform/broker"
)

// runBench: paylab bench [--quick] [--peers] [--json] [--out DIR] [--bin DIR] [--keep] [--logs DIR] [--stages LIST [--s1-rate N]]
func runBench(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(out)
	quick := fs.Bool("quick", false, "tiny sizes: every stage in well under a minute (checks the harness, not the system)")
	peers := fs.Bool("peers", false, "also run the peers (Watermill, Debezium) and every relay mode on the same PostgreSQL and Kafka, and drain the larger backlogs (needs Maven and wal_level=logical)")
	asJSON := fs.Bool("json", false, "print the report as JSON instead of the table (progress goes to stderr)")
	outDir := fs.String("out", "results", "folder the JSON report and its charts are written to")
	exe, _ := os.Executable()
	bin := fs.String("bin", filepath.Dir(exe), "folder with the orders and ledger binaries (make build)")
	keep := fs.Bool("keep", false, "keep the run's databases, role and topics")
	logs := fs.String("logs", "", "folder for the child processes' logs (default: a temporary folder)")
	stages := fs.String("stages", "", "run only these stages, comma-separated (B1,S1,C1,B2,S2,B3,S3,S4,S5,P1), and what they need; the run is then not the documentation's latest")
	s1Rate := fs.Float64("s1-rate", 0, "S1's best rate in payments/s, for S4 and S5 when --stages leaves S1 out")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		return errUsage
	}
	setup, err := loadSetupConfig()
	if err != nil {
		return err
	}
	cfg := bench.Config{
		Bin: *bin, AdminURL: setup.AdminDatabaseURL, Brokers: broker.SplitBrokers(setup.KafkaBrokers),
		Sizes: bench.Full, Log: out, LogDir: *logs, Keep: *keep, Peers: *peers, S1Rate: *s1Rate,
	}
	if *stages != "" {
		cfg.Stages = strings.Split(*stages, ",")
	}
	if *quick {
		cfg.Sizes = bench.Quick
	}
	if *asJSON {
		cfg.Log = os.Stderr
	}
	rep, runErr := bench.Run(ctx, cfg)
	path, err := writeRun(*outDir, "bench", rep.Started, rep)
	if err != nil {
		return errors.Join(runErr, err)
	}
	// The table as Markdown next to the JSON; a complete full-size run is
	// also the documentation's latest (results/bench-latest.md).
	tables, err := bench.WriteMarkdown(path, rep, runErr == nil && rep.Sizes.Name == bench.Full.Name && len(cfg.Stages) == 0)
	if err != nil {
		return errors.Join(runErr, err)
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(out)
		rep.Table(out)
		fmt.Fprintf(out, "report: %s\n", path)
		for _, t := range tables {
			fmt.Fprintf(out, "table: %s\n", t)
		}
	}
	return errors.Join(runErr, benchCharts(rep, path, cfg.Log))
}
