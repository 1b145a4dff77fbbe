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

	"github.com/paylab/paylab/internal/chaosrun"
)

// mailpitVersion is the Mailpit the Makefile builds into the tools cache.
const mailpitVersion = "v1.33.1"

// runChaos: paylab chaos list | paylab chaos run <scenario>…|all [--quick] [--json]
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
	quick := fs.Bool("quick", false, "the reduced set of counts make test runs")
	parallel := fs.Int("parallel", 3, "scenarios run side by side (those that stop a shared server run alone)")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	exe, _ := os.Executable()
	bin := fs.String("bin", filepath.Dir(exe), "folder with the orders, ledger and notifications binaries")
	home, _ := os.UserHomeDir()
	tools := os.Getenv("PAYLAB_TOOLS")
	if tools == "" {
		tools = filepath.Join(home, ".cache", "paylab", "bin")
	}
	mailpit := fs.String("mailpit", filepath.Join(tools, "mailpit-"+mailpitVersion), "Mailpit binary (make mailpit builds it)")
	logs := fs.String("logs", "", "folder for the processes' logs (default: a temporary folder)")
	if err := fs.Parse(reorder(fs, args[1:])); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if fs.NArg() == 0 {
		return errUsage
	}
	scenarios, err := chaosrun.Select(fs.Args())
	if err != nil {
		return err
	}
	if *logs == "" {
		if *logs, err = os.MkdirTemp("", "paylab-chaos-"); err != nil {
			return err
		}
	}
	sizes := chaosrun.Full
	if *quick {
		sizes = chaosrun.Quick
	}
	env := &chaosrun.Env{Bin: *bin, Mailpit: *mailpit, LogDir: *logs}
	fmt.Fprintf(out, "chaos: starting private PostgreSQL, Kafka and Mailpit (logs in %s)\n", *logs)
	if err := env.Start(ctx); err != nil {
		env.Stop()
		return fmt.Errorf("chaos: %w", err)
	}
	defer env.Stop()
	results := chaosrun.Run(ctx, env, scenarios, sizes, *parallel, out)
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
	passed := 0
	for _, r := range results {
		if r.Pass {
			passed++
		}
	}
	if !*asJSON {
		fmt.Fprintf(out, "chaos: %d passed, %d failed\n", passed, len(results)-passed)
	}
	if passed < len(results) {
		return errors.New("chaos: a scenario did not show what it must")
	}
	return nil
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
