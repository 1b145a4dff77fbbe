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
}

// summarize computes the percentiles of samples (nearest rank), with missing
// samples counted as slower than all of them.
func summarize(samples []time.Duration, missing int) Latency {
	l := Latency{N: len(samples) + missing, Missing: missing}
	if l.N == 0 {
		return l
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	at := func(q float64) Millis {
		rank := int(math.Ceil(q*float64(l.N))) - 1
		if rank >= len(sorted) {
			return Millis(math.Inf(1))
		}
		return ms(sorted[max(rank, 0)])
	}
	l.P50, l.P99 = at(0.50), at(0.99)
	if missing > 0 {
		l.Max = Millis(math.Inf(1))
	} else {
		l.Max = ms(sorted[len(sorted)-1])
	}
	return l
}

func ms(d time.Duration) Millis { return Millis(float64(d) / float64(time.Millisecond)) }

// perSecond is n events over d, or 0 when d is not positive.
func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
