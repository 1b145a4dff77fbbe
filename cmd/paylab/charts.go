package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/paylab/paylab/internal/lab/bench"
	"github.com/paylab/paylab/internal/lab/chaosrun"
	"github.com/paylab/paylab/internal/lab/plots"
)

// stamp names a run's files by its start: bench-<stamp>.json,
// chaos-<stamp>.json and their charts.
const stamp = "20060102T150405Z"

// benchCharts draws the charts of the report written at reportPath next to
// it, and says where they are on out.
func benchCharts(rep bench.Report, reportPath string, out io.Writer) error {
	files, err := plots.Bench(rep, strings.TrimSuffix(reportPath, ".json"))
	printCharts(out, files)
	if err != nil {
		return fmt.Errorf("drawing the charts: %w", err)
	}
	return nil
}

// writeChaosResults writes results as dir/chaos-<start>.json and, next to
// it, each scenario's chart; it returns the JSON's path and the charts.
func writeChaosResults(dir string, start time.Time, results []chaosrun.Result) (string, []string, error) {
	path, err := writeRun(dir, "chaos", start, results)
	if err != nil {
		return "", nil, err
	}
	files, err := plots.Chaos(results, strings.TrimSuffix(path, ".json"))
	if err != nil {
		return path, files, fmt.Errorf("drawing the charts: %w", err)
	}
	return path, files, nil
}

// writeRun writes v, indented, as dir/<kind>-<start>.json and returns its
// path.
func writeRun(dir, kind string, start time.Time, v any) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, kind+"-"+start.UTC().Format(stamp)+".json")
	return path, os.WriteFile(path, append(b, '\n'), 0o644)
}

// printCharts lists the charts written, SVG and PNG of each on one line.
func printCharts(out io.Writer, files []string) {
	for _, f := range files {
		if strings.HasSuffix(f, ".svg") {
			fmt.Fprintf(out, "chart: %s (and .png)\n", f)
		}
	}
}
