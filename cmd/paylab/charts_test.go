package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paylab/paylab/internal/lab/chaosrun"
)

// The chaos results are written as results/chaos-<start>.json, with a
// chart next to it for each scenario that has a timeline.
func TestWriteChaosResults(t *testing.T) {
	t.Parallel()
	n := func(v int64) *int64 { return &v }
	age := 1.5
	tl := &chaosrun.Timeline{Every: 250 * time.Millisecond, Samples: []chaosrun.Sample{
		{At: 0, Payments: n(0), Pending: n(0), OldestAge: new(float64), Entries: n(0), Receipts: n(0)},
		{At: 0.25, Payments: n(40), Pending: n(30), OldestAge: &age, Entries: n(10), Receipts: n(8)},
		{At: 0.5}, // the databases did not answer
		{At: 0.75, Payments: n(80), Pending: n(0), OldestAge: new(float64), Entries: n(80), Receipts: n(80)},
	}, Marks: []chaosrun.Mark{{At: 0.2, Label: "PostgreSQL stopped"}, {At: 0.6, Label: "PostgreSQL started", End: true}}}
	results := []chaosrun.Result{
		{Scenario: "postgres-restart", Mode: "outbox", Expect: chaosrun.Clean, Payments: 80, Pass: true, Timeline: tl},
		{Scenario: "kafka-down", Skipped: "stops Kafka"},
	}
	dir := filepath.Join(t.TempDir(), "results")
	start := time.Date(2026, 12, 3, 5, 8, 23, 0, time.FixedZone("CET", 3600))
	path, charts, err := writeChaosResults(dir, start, results)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "chaos-20261203T040823Z.json"); path != want {
		t.Errorf("results at %s, want %s", path, want)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back []chaosrun.Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back) != 2 || back[0].Timeline == nil || len(back[0].Timeline.Samples) != 4 || back[0].Timeline.Samples[2].Pending != nil ||
		len(back[0].Timeline.Marks) != 2 || back[1].Timeline != nil {
		t.Errorf("results read back: %+v", back)
	}
	base := filepath.Join(dir, "chaos-20261203T040823Z-postgres-restart")
	if len(charts) != 2 || charts[0] != base+".svg" || charts[1] != base+".png" {
		t.Fatalf("charts %v", charts)
	}
	svg, err := os.ReadFile(base + ".svg")
	if err != nil || !bytes.Contains(svg, []byte("PostgreSQL stopped")) {
		t.Errorf("chart: %v", err)
	}
	var out bytes.Buffer
	printCharts(&out, charts)
	if got := out.String(); got != "chart: "+base+".svg (and .png)\n" {
		t.Errorf("printed %q", got)
	}
	if strings.Contains(out.String(), "kafka-down") {
		t.Error("a skipped scenario got a chart")
	}
}
