package plots

import (
	"math"
	"path/filepath"
	"testing"
)

func TestWritePercentilesStopsACurveAtItsMissingSamples(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "latency")
	full := []Quantile{{0, 2}, {0.5, 20}, {0.9, 60}, {0.99, 200}, {0.999, 400}, {1, 450}}
	tail := []Quantile{{0, 0}, {0.5, 30}, {0.99, math.Inf(1)}, {1, math.Inf(1)}}
	if _, err := WritePercentiles(path, "S4 latency", []Curve{
		{Name: "commit → Kafka", Color: blue, Points: full},
		{Name: "commit → ledger", Color: green, Dashed: true, Points: tail},
		{Name: "never completed", Color: red, Points: []Quantile{{0, math.Inf(1)}}},
	}); err != nil {
		t.Fatal(err)
	}
	checkChart(t, path, "S4 latency", "commit → Kafka", "commit → ledger", "p50", "p99.9", "max")
	if got := nines(0.99); math.Abs(got-2) > 1e-9 {
		t.Errorf("nines(0.99) = %v", got)
	}
	if nines(1) != maxAt || nines(0.9999) != lastNines {
		t.Errorf("nines(1) = %v, nines(0.9999) = %v", nines(1), nines(0.9999))
	}
}
