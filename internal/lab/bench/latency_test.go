package bench

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

// A distribution keeps its quantiles at Levels, nearest rank, the missing
// samples ranked above every completed one, and they survive JSON.
func TestDistributionKeepsItsQuantiles(t *testing.T) {
	t.Parallel()
	var samples []time.Duration
	for i := 1000; i >= 1; i-- { // unsorted on purpose
		samples = append(samples, time.Duration(i)*time.Millisecond)
	}
	l := distribution(samples, 2)
	if len(l.Quantiles) != len(Levels) {
		t.Fatalf("%d quantiles, want %d", len(l.Quantiles), len(Levels))
	}
	want := map[float64]float64{0: 1, 0.5: 501, 0.9: 902, 0.99: 992, 0.999: math.Inf(1), 1: math.Inf(1)}
	for _, q := range l.Quantiles {
		if w, ok := want[q.Q]; ok && float64(q.Millis) != w {
			t.Errorf("q %v = %v ms, want %v", q.Q, q.Millis, w)
		}
	}
	for i := 1; i < len(l.Quantiles); i++ {
		if l.Quantiles[i].Millis < l.Quantiles[i-1].Millis {
			t.Errorf("quantiles fall from %+v to %+v", l.Quantiles[i-1], l.Quantiles[i])
		}
	}
	if l.P50 != l.Quantiles[7].Millis || l.P99 != l.Quantiles[14].Millis || !math.IsInf(float64(l.Max), 1) {
		t.Errorf("summary %+v disagrees with the quantiles", l)
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var back Latency
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Quantiles) != len(Levels) || !math.IsInf(float64(back.Quantiles[len(Levels)-1].Millis), 1) || back.Quantiles[7].Millis != 501 {
		t.Errorf("after JSON: %+v", back.Quantiles)
	}
	if l := distribution(nil, 0); l.N != 0 || l.Quantiles != nil {
		t.Errorf("distribution(nil) = %+v", l)
	}
	if l := summarize(samples, 0); l.Quantiles != nil {
		t.Errorf("summarize keeps quantiles: %d", len(l.Quantiles))
	}
}
