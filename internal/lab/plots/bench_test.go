package plots

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/paylab/paylab/internal/lab/bench"
)

// report is a bench report as a full run with --peers leaves it (figures
// from one such run), S4's distributions included.
func report() bench.Report {
	capture := func(c int, perSecond float64) bench.CaptureResult {
		return bench.CaptureResult{Concurrency: c, Completed: 1000, PerSecond: perSecond}
	}
	write := func(who string, c int, perSecond float64) bench.WriteResult {
		return bench.WriteResult{Contender: who, CaptureResult: capture(c, perSecond)}
	}
	dist := func(p50, p99 float64, missing bool) bench.Latency {
		l := bench.Latency{N: 7500, P50: bench.Millis(p50), P99: bench.Millis(p99), Max: bench.Millis(p99 * 1.4)}
		for _, q := range bench.Levels {
			v := p50 * math.Pow(p99/p50, nines(q)/2) // log-linear in the nines
			if missing && q >= 0.99 {
				v = math.Inf(1)
			}
			l.Quantiles = append(l.Quantiles, bench.Quantile{Q: q, Millis: bench.Millis(v)})
		}
		return l
	}
	return bench.Report{
		Sizes: bench.Full,
		Stages: bench.Stages{
			B1: []bench.CaptureResult{capture(8, 1044), capture(32, 922)},
			S1: []bench.CaptureResult{capture(8, 650), capture(32, 750)},
			C1: []bench.WriteResult{write("insert-only", 8, 1973), write("notify-in-tx", 8, 1588), write("notify-after-commit", 8, 1812),
				write("watermill", 8, 2136)},
			B2: bench.ProduceResult{Events: 100000, PerSecond: 133515},
			S2: []bench.DrainResult{{Relays: 1, Events: 100000, PerSecond: 16872}, {Relays: 3, Events: 100000, PerSecond: 23197}},
			B3: bench.ConsumeResult{Events: 100000, PerSecond: 381726},
			S3: bench.ConsumeResult{Events: 100000, PerSecond: 6128},
			S4: []bench.E2EResult{
				{Mode: "LISTEN/NOTIFY", Percent: 25, Rate: 187, Payments: 3740, Published: dist(12, 38, false), Applied: dist(23, 49, false)},
				{Mode: "polling only", Percent: 25, Rate: 187, Payments: 3740, Published: dist(502, 990, false), Applied: dist(517, 1006, false)},
				{Mode: "LISTEN/NOTIFY", Percent: 50, Rate: 375, Payments: 7500, Published: dist(92, 398, false), Applied: dist(163, 490, false)},
				{Mode: "polling only", Percent: 50, Rate: 375, Payments: 7500, Published: dist(102, 310, false), Applied: dist(187, 596, true)},
			},
			S5: bench.Growth{History: 5000000, S2: bench.DrainResult{Relays: 1, Events: 100000, PerSecond: 13435},
				S2Base: []bench.DrainResult{{Relays: 1, Events: 100000, PerSecond: 15100}, {Relays: 1, Events: 100000, PerSecond: 14000}, {Relays: 1, Events: 100000, PerSecond: 16000}}},
			P1: []bench.PeerDrain{
				{Contender: "paylab-poll", Rounds: 3, DrainResult: bench.DrainResult{Events: 100000, PerSecond: 12083}},
				{Contender: "paylab-wal", Rounds: 3, DrainResult: bench.DrainResult{Events: 100000, PerSecond: 31392}},
				{Contender: "debezium", Rounds: 3, DrainResult: bench.DrainResult{Events: 100000, PerSecond: 8025}},
				{Contender: "watermill", Rounds: 3, DrainResult: bench.DrainResult{Events: 100000, PerSecond: 772}},
			},
		},
	}
}

func TestBenchDrawsThroughputAndLatency(t *testing.T) {
	t.Parallel()
	base := filepath.Join(t.TempDir(), "bench-20261203T050823Z")
	files, err := Bench(report(), base)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Fatalf("files %v, want the throughput and latency charts as SVG and PNG", files)
	}
	checkChart(t, base+"-throughput", "paylab bench (full sizes)",
		"S1 POST /v1/payments through the orders API, concurrency 32", "750 req/s  (0.81× B1)",
		"C1 notify-after-commit, concurrency 8", "1 812 tx/s  (0.92× insert-only)",
		"S2 relay drain of 100 000 events, 3 relays", "23 197 events/s  (1.37× 1 relay)",
		"S5 the same drain on a fresh database, 1 relay", "15 100 events/s",
		"S5 the same drain over 5 000 000 rows of history, 1 relay", "(0.89× without history)",
		"P1 paylab-wal, drain of 100 000 events", "31 392 events/s  (3.91× Debezium)", "P1 watermill, drain of 100 000 events",
		"S3 the ledger through the inbox", "6 128 events/s  (0.016× B3)")
	checkChart(t, base+"-latency", "paylab bench (full sizes): S4 end to end, 7500 payments at 375/s each: latency by percentile",
		"commit → Kafka, LISTEN/NOTIFY (p50 92 ms, p99 398 ms)", "commit → ledger, polling only (p50 187 ms, p99 596 ms)")
}

// A run that ended before any stage measured leaves no chart, and no error.
func TestBenchOfAnEmptyReportDrawsNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files, err := Bench(bench.Report{Sizes: bench.Quick}, filepath.Join(dir, "bench"))
	if err != nil || len(files) != 0 {
		t.Errorf("Bench = %v, %v", files, err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("files left: %v", left)
	}
}

func TestContenderKinds(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]Kind{"insert-only": Baseline, "notify-in-tx": Paylab, "notify-after-commit": Paylab,
		"paylab-poll": Paylab, "paylab-wal": Paylab, "watermill": Peer, "debezium": Peer} {
		if got := contender(name); got != want {
			t.Errorf("contender(%q) = %v, want %v", name, got, want)
		}
	}
}
