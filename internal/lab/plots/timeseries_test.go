package plots

import (
	"math"
	"path/filepath"
	"testing"
)

func TestWriteTimelineBreaksLinesAtGapsAndLabelsTheMarks(t *testing.T) {
	t.Parallel()
	var pending Series
	pending.Name, pending.Color = "outbox rows pending", red
	for i := range 40 {
		v := float64(i * 10)
		if i >= 10 && i < 14 {
			v = math.NaN() // the database was down
		}
		pending.Points = append(pending.Points, Point{T: float64(i) / 4, V: v})
	}
	lone := Series{Name: "one sample", Color: teal, Points: []Point{{T: 1, V: 5}, {T: 2, V: math.NaN()}}}
	path := filepath.Join(t.TempDir(), "timeline")
	if _, err := WriteTimeline(path, "kafka-down", []SeriesPanel{
		{YLabel: "rows", Series: []Series{pending, lone}},
		{YLabel: "nothing", Series: []Series{{Name: "empty", Points: []Point{{T: 1, V: math.NaN()}}}}},
	}, []Mark{{T: 2, Label: "Kafka stopped"}, {T: 7.5, Label: "Kafka started", End: true}}); err != nil {
		t.Fatal(err)
	}
	checkChart(t, path, "kafka-down", "outbox rows pending", "one sample", "Kafka stopped", "Kafka started",
		"fault starts", "fault ends", "seconds since the load started")
}
