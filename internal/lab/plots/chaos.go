package plots

import (
	"errors"
	"fmt"
	"math"

	"github.com/paylab/paylab/internal/lab/chaosrun"
)

// Chaos draws, for each result with a timeline, its chart next to the
// run's JSON, base being the JSON's path without ".json": base-<scenario>
// (.svg and .png), the payments and effects, the pending outbox rows and
// the oldest one's age over time, the fault's moments marked. It returns
// the files written.
func Chaos(results []chaosrun.Result, base string) ([]string, error) {
	var files []string
	var errs []error
	for _, r := range results {
		if r.Timeline == nil || len(r.Timeline.Samples) == 0 {
			continue
		}
		f, err := WriteTimeline(base+"-"+r.Scenario, chaosTitle(r), chaosPanels(*r.Timeline), chaosMarks(*r.Timeline))
		if err != nil {
			err = fmt.Errorf("%s: %w", r.Scenario, err)
		}
		files, errs = append(files, f...), append(errs, err)
	}
	return files, errors.Join(errs...)
}

func chaosTitle(r chaosrun.Result) string {
	verdict := "FAIL"
	if r.Pass {
		verdict = "PASS"
	}
	ack := ""
	if r.Acknowledged > 0 {
		ack = fmt.Sprintf(", %d of %d acknowledged lost", r.AckLost, r.Acknowledged)
	}
	return fmt.Sprintf("%s (%s, expected %s): %s\n%d payments%s, %d lost, %d phantom, %d duplicate effects, %d duplicates on the wire",
		r.Scenario, r.Mode, r.Expect, verdict, r.Payments, ack, r.Lost, r.Phantom, r.DupEffects, r.DupOnWire)
}

// chaosPanels: the counts since the load started, the pending rows, the
// oldest pending row's age.
func chaosPanels(tl chaosrun.Timeline) []SeriesPanel {
	counter := func(name string, get func(chaosrun.Sample) *int64) Series {
		s := Series{Name: name}
		first := math.NaN()
		for _, smp := range tl.Samples {
			v := math.NaN()
			if p := get(smp); p != nil {
				v = float64(*p)
				if math.IsNaN(first) {
					first = v
				}
				v -= first
			}
			s.Points = append(s.Points, Point{T: smp.At, V: v})
		}
		return s
	}
	payments := counter("payments committed", func(s chaosrun.Sample) *int64 { return s.Payments })
	payments.Color = dark
	entries := counter("ledger journal entries", func(s chaosrun.Sample) *int64 { return s.Entries })
	entries.Color = green
	receipts := counter("receipts sent", func(s chaosrun.Sample) *int64 { return s.Receipts })
	receipts.Color = teal

	pending := Series{Name: "outbox rows pending", Color: red}
	age := Series{Name: "oldest pending row's age", Color: purple}
	for _, smp := range tl.Samples {
		p, a := math.NaN(), math.NaN()
		if smp.Pending != nil {
			p = float64(*smp.Pending)
		}
		if smp.OldestAge != nil {
			a = *smp.OldestAge
		}
		pending.Points = append(pending.Points, Point{T: smp.At, V: p})
		age.Points = append(age.Points, Point{T: smp.At, V: a})
	}
	return []SeriesPanel{
		{YLabel: "count since the load started", Series: []Series{payments, entries, receipts}},
		{YLabel: "pending outbox rows", Series: []Series{pending}},
		{YLabel: "oldest pending (s)", Series: []Series{age}},
	}
}

func chaosMarks(tl chaosrun.Timeline) []Mark {
	var out []Mark
	for _, m := range tl.Marks {
		out = append(out, Mark{T: m.At, Label: m.Label, End: m.End})
	}
	return out
}
