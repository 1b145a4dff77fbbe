package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/lab/bench"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// paylab bench --quick runs every stage of the harness on the stack, against
// the real binaries: each stage measures something, the table has every row
// and a verdict for every target, the JSON report on disk says the same,
// and the run leaves no database or role behind.
func TestBenchQuick(t *testing.T) {
	t.Parallel()
	results, printed := benchQuick(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	files, _ := filepath.Glob(filepath.Join(results, "bench-*.json"))
	if len(files) != 1 {
		t.Fatalf("report files %v, want one\n%s", files, printed)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report: %v", err)
	}

	st := rep.Stages
	positive := map[string]float64{
		"B1 c=8": st.B1[0].PerSecond, "B1 c=32": st.B1[1].PerSecond, "S1 c=8": st.S1[0].PerSecond, "S1 c=32": st.S1[1].PerSecond,
		"B2": st.B2.PerSecond, "S2 1 relay": st.S2[0].PerSecond, "S2 3 relays": st.S2[1].PerSecond,
		"B3": st.B3.PerSecond, "S3": st.S3.PerSecond, "S5 S2": st.S5.S2.PerSecond,
		"S2 statements per batch": st.S2[0].Statements.PerBatch,
	}
	if len(st.S3Variants) != 3 {
		t.Errorf("S3 variants %+v, want 3", st.S3Variants)
	}
	for _, v := range st.S3Variants {
		positive["S3 "+v.Name] = v.PerSecond
		if v.Events > rep.Sizes.Backlog {
			t.Errorf("S3 %s applied %d events, more than the %d distinct ones", v.Name, v.Events, rep.Sizes.Backlog)
		}
	}
	for _, r := range append(st.S4, st.S5.S4...) {
		positive["S4 "+r.Mode+" payments"] = float64(r.Payments)
		positive["S4 "+r.Mode+" p50"] = float64(r.Applied.P50)
		if r.Applied.Missing > 0 {
			t.Errorf("S4 %s: %d payments never reached the ledger", r.Mode, r.Applied.Missing)
		}
	}
	for what, v := range positive {
		if v <= 0 {
			t.Errorf("%s = %v, want > 0", what, v)
		}
	}
	if st.S2[0].Relays != 1 || st.S2[1].Relays != 3 || st.S2[0].Events != rep.Sizes.Backlog {
		t.Errorf("S2 runs %+v", st.S2)
	}
	for _, r := range st.S4 {
		if want := map[string]int{"LISTEN/NOTIFY": 1}[r.Mode]; r.Listens != want {
			t.Errorf("S4 %d%% %s: %d LISTEN statements, want %d", r.Percent, r.Mode, r.Listens, want)
		}
	}
	if rep.Machine.Cores < 1 || rep.Machine.Go == "" || rep.Machine.PostgreSQL == "" || rep.Machine.SynchronousCommit != "on" {
		t.Errorf("machine %+v", rep.Machine)
	}

	targets := 0
	for _, row := range rep.Rows {
		if !strings.Contains(printed, row.What) {
			t.Errorf("row %q is not in the table", row.What)
		}
		if row.Target != "" {
			targets++
			if row.Verdict != bench.Pass && row.Verdict != bench.Miss {
				t.Errorf("row %q has target %q and verdict %q", row.What, row.Target, row.Verdict)
			}
		}
	}
	// S1 ×2, C1 ×2, S2/B2, 3 relays, statements ×2, S3, S4 ×4, S5 ×3.
	if targets != 16 {
		t.Errorf("%d rows with a target, want 16", targets)
	}
	var loads []string
	for _, r := range st.S4 {
		loads = append(loads, fmt.Sprintf("%d%% %s", r.Percent, r.Mode))
	}
	if got := strings.Join(loads, ", "); got != "25% LISTEN/NOTIFY, 25% polling only, 50% LISTEN/NOTIFY, 50% polling only" {
		t.Errorf("S4 ran %s", got)
	}
	if len(st.C1) != 3*len(rep.Sizes.Concurrency) || len(st.P1) != 0 {
		t.Errorf("C1 %d results (want three contenders at each concurrency), P1 %d (want none without --peers)", len(st.C1), len(st.P1))
	}
	base := strings.TrimSuffix(files[0], ".json")
	for _, chart := range []string{"-throughput.svg", "-throughput.png", "-latency.svg", "-latency.png"} {
		if fi, err := os.Stat(base + chart); err != nil || fi.Size() == 0 {
			t.Errorf("chart %s: %v", chart, err)
		}
	}
	for _, r := range st.S4 {
		if len(r.Published.Quantiles) != len(bench.Levels) || len(r.Applied.Quantiles) != len(bench.Levels) {
			t.Errorf("S4 %s keeps %d and %d quantiles, want %d", r.Mode, len(r.Published.Quantiles), len(r.Applied.Quantiles), len(bench.Levels))
		}
	}
	for _, want := range []string{"targets:", "machine:", "report: " + files[0], "chart: " + base + "-throughput.svg", "chart: " + base + "-latency.svg"} {
		if !strings.Contains(printed, want) {
			t.Errorf("the output lacks %q:\n%s", want, printed)
		}
	}

	m := regexp.MustCompile(`bench: run ([0-9a-f]+) `).FindStringSubmatch(printed)
	if m == nil {
		t.Fatalf("no run id in\n%s", printed)
	}
	admin, err := pgx.Connect(ctx, testenv.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var left int
	if err := admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_database WHERE datname LIKE 'bench\_' || $1 || '%')
		+ (SELECT count(*) FROM pg_roles WHERE rolname = 'paylab_bench_' || $1)`, m[1]).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("the run left %d databases or roles behind", left)
	}
	kafka, err := sarama.NewClusterAdmin(testenv.Brokers(), testenv.KafkaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer kafka.Close()
	testenv.Eventually(t, 20*time.Second, "the run's topics deleted", func() bool {
		topics, err := kafka.ListTopics()
		if err != nil {
			return false
		}
		for name := range topics {
			if strings.HasPrefix(name, "paylab-bench-"+m[1]) {
				return false
			}
		}
		return true
	})
}

// --stages runs what the stages named need and nothing else: B3 and S3
// read the topic S2's drains fill, so --stages B3,S3 drains it first.
func TestBenchStagesRunWhatTheyNeed(t *testing.T) {
	t.Parallel()
	_, printed := benchQuick(t, "--stages", "B3,S3", "--json")
	var rep bench.Report
	if err := json.Unmarshal([]byte(printed), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, printed)
	}
	st := rep.Stages
	if st.B3.PerSecond <= 0 || st.S3.PerSecond <= 0 || st.S3.Events == 0 {
		t.Errorf("B3 %+v, S3 %+v: want both measured on the drained backlog", st.B3, st.S3)
	}
	if len(st.B1) != 0 || len(st.S1) != 0 || len(st.C1) != 0 || len(st.S4) != 0 || st.S5.History != 0 {
		t.Errorf("stages that were not asked for ran: B1 %d, S1 %d, C1 %d, S4 %d, S5 history %d", len(st.B1), len(st.S1), len(st.C1), len(st.S4), st.S5.History)
	}
}

// benchQuick runs paylab bench --quick with args against freshly built
// services, and returns the folder it wrote to and what it printed.
func benchQuick(t *testing.T, args ...string) (results, printed string) {
	t.Helper()
	bin := testenv.BuildServices(t)
	results = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var out bytes.Buffer
	args = append([]string{"bench", "--quick", "--bin", bin, "--out", results}, args...)
	if err := run(ctx, args, &out); err != nil {
		t.Fatalf("paylab %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return results, out.String()
}
