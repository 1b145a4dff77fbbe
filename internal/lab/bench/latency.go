package bench

import (
	"math"
	"slices"
	"strconv"
	"time"
)

// Millis is a duration in milliseconds; infinite when what it measures
// never happened (JSON null).
type Millis float64

// MarshalJSON writes null for an infinite value, which JSON cannot hold.
func (m Millis) MarshalJSON() ([]byte, error) {
	if math.IsInf(float64(m), 0) || math.IsNaN(float64(m)) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, float64(m), 'f', 3, 64), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (m *Millis) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*m = Millis(math.Inf(1))
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	*m = Millis(f)
	return err
}

// Latency summarises a set of durations, in milliseconds. Missing counts the
// samples that never completed (an event the ledger had not applied when the
// run gave up waiting); they rank above every completed one, so a p99 that
// falls among them is infinite (reported as "> the wait").
type Latency struct {
	N       int    `json:"n"`
	Missing int    `json:"missing,omitempty"`
	P50     Millis `json:"p50_ms"`
	P99     Millis `json:"p99_ms"`
	Max     Millis `json:"max_ms"`
	// Quantiles is the distribution at Levels, for the stages whose
	// latency is drawn (S4's commit → Kafka and commit → ledger).
	Quantiles []Quantile `json:"quantiles,omitempty"`
}

// Quantile is the latency at or below which a fraction Q of the samples
// fall (nearest rank); infinite where that rank is a missing sample.
type Quantile struct {
	Q      float64 `json:"q"`
	Millis Millis  `json:"ms"`
}

// Levels are the quantiles a distribution keeps: enough for its curve,
// few enough for the report.
var Levels = []float64{0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 1}

// summarize computes the percentiles of samples (nearest rank), with missing
// samples counted as slower than all of them, and the Quantiles at levels.
func summarize(samples []time.Duration, missing int, levels ...float64) Latency {
	l := Latency{N: len(samples) + missing, Missing: missing}
	if l.N == 0 {
		return l
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	l.P50, l.P99, l.Max = quantile(sorted, l.N, 0.50), quantile(sorted, l.N, 0.99), quantile(sorted, l.N, 1)
	for _, q := range levels {
		l.Quantiles = append(l.Quantiles, Quantile{Q: q, Millis: quantile(sorted, l.N, q)})
	}
	return l
}

// distribution is summarize with the Quantiles at Levels.
func distribution(samples []time.Duration, missing int) Latency {
	return summarize(samples, missing, Levels...)
}

// quantile is the nearest-rank q quantile of n samples, sorted the
// completed ones, the others (n - len(sorted)) slower than all of them.
func quantile(sorted []time.Duration, n int, q float64) Millis {
	rank := int(math.Ceil(q*float64(n))) - 1
	if rank >= len(sorted) {
		return Millis(math.Inf(1))
	}
	return ms(sorted[max(rank, 0)])
}

func ms(d time.Duration) Millis { return Millis(float64(d) / float64(time.Millisecond)) }

// perSecond is n events over d, or 0 when d is not positive.
func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
