package plots

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteBarsDrawsEveryPanelWithBars(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "bars")
	files, err := WriteBars(path, "throughput", []BarPanel{
		{Title: "Consumer", Unit: "events per second", Bars: []Bar{
			{Label: "B3 bare consumer group", Value: 381726, Figure: "381 726 events/s", Kind: Baseline},
			{Label: "S3 ledger", Value: 6128, Figure: "6 128 events/s (0.016× B3)", Kind: Paylab},
		}},
		{Title: "Empty panel", Unit: "nothing"},
		{Title: "Relay", Unit: "events per second", Bars: []Bar{{Label: "P1 debezium", Value: 8025, Figure: "8 025 events/s", Kind: Peer}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0] != path+".svg" || files[1] != path+".png" {
		t.Errorf("files %v", files)
	}
	checkChart(t, path, "throughput", "Consumer", "Relay", "B3 bare consumer group", "6 128 events/s (0.016× B3)",
		"P1 debezium", "raw baseline", "paylab", "peer", "250 000")
}

// The legend names only the kinds of bar drawn.
func TestWriteBarsLegendHasTheKindsDrawn(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "bars")
	if _, err := WriteBars(path, "no peers", []BarPanel{{Title: "Consumer", Bars: []Bar{
		{Label: "B3", Value: 2, Figure: "2/s", Kind: Baseline}, {Label: "S3", Value: 1, Figure: "1/s", Kind: Paylab}}}}); err != nil {
		t.Fatal(err)
	}
	checkChart(t, path, "raw baseline", "paylab")
	b, err := os.ReadFile(path + ".svg")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(">peer<")) {
		t.Error("the legend names the peers, and no peer is drawn")
	}
}

func TestThousands(t *testing.T) {
	t.Parallel()
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1 000", 133515.4: "133 515", 1e6: "1 000 000", -2500: "-2 500"} {
		if got := thousands(v); got != want {
			t.Errorf("thousands(%v) = %q, want %q", v, got, want)
		}
	}
}
