// Command paylab is the operator tool of the paylab reference system.
//
//	paylab migrate   create the databases and roles, apply migrations
//	paylab topics    create the Kafka topics
//	paylab init      both of the above and a demo API key (the one-shot init of docker compose)
//	paylab keys      create, list and revoke merchant API keys
//	paylab load      place payments at a constant rate, report latency percentiles
//	paylab probe     GET a URL, exit 0 on 2xx (container health checks)
//	paylab verify    reconcile orders, ledger and notifications; non-zero on violations
//	paylab chaos     run the chaos scenarios (naive vs outbox+inbox under faults)
//	paylab bench     measure each stage against a raw baseline, as ratios
//	paylab console   a web page to watch payments cross the hole and to break it on purpose
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/paylab/paylab/internal/platform/process"
)

const usage = `paylab: operator tool of the paylab reference system

usage: paylab <command>

commands:
  migrate   create the three databases and their roles, apply migrations
            (RELAY_MODE=wal: the orders role also gets REPLICATION)
  topics    create the Kafka topics
  init      migrate, then topics, then print the demo merchant's API key
            (DEMO_MERCHANT, default mer_7; kept in DEMO_API_KEY_FILE, default
            .paylab/demo-api-key ("-": none), made anew when it holds no active key)
  keys      keys create --merchant M [--name N]: a new API key of merchant M,
            printed once (only its hash is stored, in the orders and ledger
            databases); keys list [--merchant M] [--json]; keys revoke ID
  load      place payments at a constant rate; report latency percentiles
            (paylab load --url http://127.0.0.1:8080 --rate 100 --count 1000)
  probe URL GET URL; exit 0 when it answers 2xx (container health checks)
  verify    reconcile orders, ledger and notifications (and the topic); print
            lost, phantom, duplicate and out-of-order effects; exit 1 on any
  chaos     chaos list | chaos run <scenario>…|all|ha [--quick] [--json]
            [--target local|compose] [--relay-mode poll|wal] [--kafka-nodes 3|1]:
            faults under load, against private servers (local; a 3-broker
            Kafka cluster by default) or a running docker compose deployment
            over its admin APIs (compose); a table of what each one cost
  bench     bench [--quick] [--json] [--out DIR]: each stage of the system against
            a raw baseline (capture, produce, relay, consume, end to end, growth),
            on the stack; a table of figures and ratios, and a JSON report
  console   console [--target local|compose] [--addr 127.0.0.1:8090] [--mode outbox|naive]:
            one web page: the flow with a counter per stage, fault toggles,
            kills, the outbox/naive switch (local), payments and the reconciliation

Settings come from the environment; see docs/operations.md, "Configuration".
`

func main() {
	process.Main("paylab", usage, func(ctx context.Context, args []string) error { return run(ctx, args, os.Stdout) })
}

// errUsage makes process.Main print the usage and exit with status 2.
var errUsage = process.ErrUsage

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	switch args[0] {
	case "migrate":
		return runMigrate(ctx, out)
	case "topics":
		return runTopics(ctx, out)
	case "init":
		if err := runMigrate(ctx, out); err != nil {
			return err
		}
		if err := runTopics(ctx, out); err != nil {
			return err
		}
		return runDemoKey(ctx, out)
	case "keys":
		return runKeys(ctx, args[1:], out)
	case "load":
		return runLoad(ctx, args[1:], out)
	case "chaos":
		return runChaos(ctx, args[1:], out)
	case "bench":
		return runBench(ctx, args[1:], out)
	case "verify":
		return runVerify(ctx, args[1:], out)
	case "console":
		return runConsole(ctx, args[1:], out)
	case "probe":
		return runProbe(ctx, args[1:], out)
	case "help", "-h", "--help":
		fmt.Fprint(out, usage)
		return nil
	default:
		return errUsage
	}
}
