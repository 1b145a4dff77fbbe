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
	"text/tabwriter"
	"time"

	"github.com/paylab/paylab/internal/lab/chaosrun"
)

// mailpitVersion is the Mailpit the Makefile builds into the tools cache.
const mailpitVersion = "v1.33.1"

// defaultMailpit is where the Makefile builds Mailpit: the tools cache,
// PAYLAB_TOOLS or ~/.cache/paylab/bin.
func defaultMailpit() string {
	tools := os.Getenv("PAYLAB_TOOLS")
	if tools == "" {
		home, _ := os.UserHomeDir()
		tools = filepath.Join(home, ".cache", "paylab", "bin")
	}
	return filepath.Join(tools, "mailpit-"+mailpitVersion)
}

// runChaos: paylab chaos list | paylab chaos run <scenario>…|all|ha [--target local|compose] [--relay-mode poll|wal] [--kafka-nodes 3|1] [--quick] [--json] [--out DIR]
func runChaos(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	switch args[0] {
	case "list":
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		for _, s := range chaosrun.Scenarios() {
			fmt.Fprintf(tw, "%s\t%s\n", s.Name, s.Description)
		}
		return tw.Flush()
	case "run":
	default:
		return errUsage
	}
	fs := flag.NewFlagSet("chaos run", flag.ContinueOnError)
	fs.SetOutput(out)
	quick := fs.Bool("quick", false, "the reduced counts make test runs; with all, the quick set of scenarios")
	parallel := fs.Int("parallel", 3, "scenarios run side by side (those that stop a shared server run alone; compose: one at a time)")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	outDir := fs.String("out", "results", "folder the results (JSON) and each scenario's chart are written to")
	target := fs.String("target", "local", "local: start the services against private servers for each scenario;\n"+
		"compose: a running docker compose deployment, over its admin APIs (CHAOS_* settings, docs/chaos.md)")
	envFile := fs.String("env-file", ".env", "compose: the .env that docker compose read (the environment wins over it, as in compose)")
	exe, _ := os.Executable()
	bin := fs.String("bin", filepath.Dir(exe), "local: folder with the orders, ledger and notifications binaries")
	mailpit := fs.String("mailpit", defaultMailpit(), "local: Mailpit binary (make mailpit builds it)")
	relayMode := fs.String("relay-mode", chaosrun.RelayPoll, "local: the relays' RELAY_MODE, poll (claim rows with leases) or wal (stream a replication slot);\n"+
		"compose: the deployment's RELAY_MODE is read from the environment and .env instead")
	kafkaNodes := fs.Int("kafka-nodes", 3, "local: brokers of the private Kafka: 3 (replication factor 3, min.insync.replicas 2) or 1 (the scenarios that kill brokers are skipped)")
	logs := fs.String("logs", "", "local: folder for the processes' logs (default: a temporary folder)")
	if err := fs.Parse(reorder(fs, args[1:])); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if fs.NArg() == 0 {
		return errUsage
	}
	scenarios, err := chaosrun.Select(fs.Args(), *quick)
	if err != nil {
		return err
	}
	sizes := chaosrun.Full
	if *quick {
		sizes = chaosrun.Quick
	}
	if *relayMode != chaosrun.RelayPoll && *relayMode != chaosrun.RelayWAL {
		return fmt.Errorf("chaos: --relay-mode %q is not %s or %s", *relayMode, chaosrun.RelayPoll, chaosrun.RelayWAL)
	}
	var t chaosrun.Target
	switch *target {
	case "local":
		if *logs == "" {
			if *logs, err = os.MkdirTemp("", "paylab-chaos-"); err != nil {
				return err
			}
		}
		env := &chaosrun.Env{Bin: *bin, Mailpit: *mailpit, LogDir: *logs, RelayMode: *relayMode, KafkaNodes: *kafkaNodes}
		fmt.Fprintf(out, "chaos: starting private PostgreSQL, Kafka (%d brokers) and Mailpit (relays in %s mode; logs in %s)\n", *kafkaNodes, *relayMode, *logs)
		if err := env.Start(ctx); err != nil {
			env.Stop()
			return fmt.Errorf("chaos: %w", err)
		}
		defer env.Stop()
		t = env
	case "compose":
		if isSet(fs, "relay-mode") {
			return errors.New("chaos: --relay-mode is for --target local; a compose deployment's relays run the RELAY_MODE of its environment and .env")
		}
		c, err := composeTarget(ctx, *envFile, isSet(fs, "env-file"), out)
		if err != nil {
			return fmt.Errorf("chaos: %w", err)
		}
		t = c
	default:
		return fmt.Errorf("chaos: --target %q is not local or compose", *target)
	}
	started := time.Now()
	results := chaosrun.Run(ctx, t, scenarios, sizes, *parallel, out)
	// The results are the verdicts; a folder that cannot be written (a
	// read-only container) does not change them.
	path, charts, saveErr := writeChaosResults(*outDir, started, results)
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(results); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(out)
		chaosrun.Table(out, results)
	}
	var passed, skipped int
	for _, r := range results {
		switch {
		case r.Skipped != "":
			skipped++
		case r.Pass:
			passed++
		}
	}
	failed := len(results) - passed - skipped
	if !*asJSON {
		fmt.Fprintf(out, "chaos: %d passed, %d failed, %d skipped\n", passed, failed, skipped)
		if path != "" {
			fmt.Fprintf(out, "results: %s\n", path)
		}
		printCharts(out, charts)
	}
	if saveErr != nil {
		fmt.Fprintf(os.Stderr, "chaos: results not saved in full: %v\n", saveErr)
	}
	switch {
	case failed > 0:
		return errors.New("chaos: a scenario did not show what it must")
	case passed == 0:
		return errors.New("chaos: no scenario could run on this target")
	}
	return nil
}

// composeTarget reads where the running compose deployment answers — the
// environment over envFile, as docker compose interpolates them — and
// checks that it is up and takes the chaos token.
func composeTarget(ctx context.Context, envFile string, required bool, out io.Writer) (*chaosrun.Compose, error) {
	environ, err := readEnviron(envFile, required)
	if err != nil {
		return nil, err
	}
	cfg, err := chaosrun.LoadComposeConfig(environ)
	if err != nil {
		return nil, err
	}
	relays := fmt.Sprintf("%d relay admin URLs", len(cfg.RelayAdminURLs))
	if cfg.RelayDiscover != "" {
		relays = "relays found at " + cfg.RelayDiscover
	}
	fmt.Fprintf(out, "chaos: against the docker compose deployment at %s (OUTBOX_MODE=%s, INBOX_ENABLED=%t, RELAY_MODE=%s, %s), one scenario at a time\n",
		cfg.APIURL, cfg.OutboxMode, cfg.InboxEnabled, cfg.RelayMode, relays)
	c := chaosrun.NewCompose(cfg)
	if err := c.Check(ctx); err != nil {
		return nil, err
	}
	if cfg.RelayDiscover != "" {
		urls := c.RelayAdminURLs()
		fmt.Fprintf(out, "chaos: %d relays at %s: %s (found again before each scenario)\n", len(urls), cfg.RelayDiscover, strings.Join(urls, " "))
	}
	return c, nil
}

// isSet reports whether the flag called name was given.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// reorder moves flags before positional arguments, so that
// `chaos run all --quick` parses like `chaos run --quick all`.
func reorder(fs *flag.FlagSet, args []string) []string {
	var flags, rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' {
			rest = append(rest, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		// A flag that takes a value consumes the next argument.
		if f := fs.Lookup(name); f != nil && i+1 < len(args) {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
				i++
				flags = append(flags, args[i])
			}
		}
	}
	return append(flags, rest...)
}
