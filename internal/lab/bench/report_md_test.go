package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The Markdown page carries the run's date and machine with its table, one
// line per row, and keeps a pipe inside its cell.
func TestMarkdownHasTheRunsMachineDateAndRows(t *testing.T) {
	t.Parallel()
	r := Report{
		Started: time.Date(2026, 12, 3, 17, 14, 9, 0, time.UTC), Seconds: 65, Sizes: Full,
		Machine: Machine{Cores: 2, CPU: "AMD EPYC", MemoryGB: 24, OS: "Debian", Go: "go1.26", PostgreSQL: "15.18", SynchronousCommit: "on", Kafka: "Apache Kafka 4.1.1"},
		Rows: []Row{
			{Stage: "B1", What: "raw capture SQL", Figure: "1044 tx/s", P50: ptr(Millis(7.1))},
			{Stage: "S1", What: "a | b", Figure: "650 req/s", Baseline: "B1", Ratio: ptr(0.62), Target: "≥ 0.75", Verdict: Miss},
		},
		Notes: []string{"B1: a note", "  an indented note"},
	}
	dir := t.TempDir()
	files, err := WriteMarkdown(filepath.Join(dir, "bench-20261203T171409Z.json"), r, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(dir, "bench-20261203T171409Z.md"), filepath.Join(dir, LatestMarkdown)}; strings.Join(files, ",") != strings.Join(want, ",") {
		t.Fatalf("WriteMarkdown wrote %v, want %v", files, want)
	}
	b, err := os.ReadFile(files[1])
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{
		"# paylab bench, 2026-12-03 17:14 UTC\n",
		"from `bench-20261203T171409Z.json`",
		"- **machine:** 2 cores (AMD EPYC), 24 GB, Debian; Go 1.26;",
		"- **run:** full sizes, started 2026-12-03T17:14:09Z, 1m5s in all\n",
		"- **targets:** 0 pass, 1 miss",
		"| B1 | raw capture SQL | 1044 tx/s | 7.1ms | - | - | - | - | - | - |\n",
		`| S1 | a \| b | 650 req/s | - | - | - | B1 | 0.62 | ≥ 0.75 | miss |` + "\n",
		"- B1: a note\n  - an indented note\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the page lacks %q:\n%s", want, md)
		}
	}
	if files, err := WriteMarkdown(filepath.Join(dir, "bench-x.json"), r, false); err != nil || len(files) != 1 {
		t.Errorf("WriteMarkdown(latest false) = %v, %v; want the run's page only", files, err)
	}
}
