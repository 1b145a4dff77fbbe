package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is a run: every figure, the table's rows, and the machine.
type Report struct {
	Started time.Time `json:"started"`
	Seconds float64   `json:"seconds"` // the whole run
	Sizes   Sizes     `json:"sizes"`
	Machine Machine   `json:"machine"`
	Rows    []Row     `json:"rows"`
	Notes   []string  `json:"notes"`
	Stages  Stages    `json:"stages"`
}

// Stages are the measurements, stage by stage.
type Stages struct {
	B1 []CaptureResult `json:"b1_raw_capture"`
	// B1HTTP is B1's statements behind a bare net/http handler: what HTTP
	// alone adds (the floor under S1).
	B1HTTP []CaptureResult `json:"b1_http_floor,omitempty"`
	S1     []CaptureResult `json:"s1_http_capture"`
	C1     []WriteResult   `json:"c1_outbox_write"`
	B2     ProduceResult   `json:"b2_raw_produce"`
	S2     []DrainResult   `json:"s2_relay_drain"`
	B3     ConsumeResult   `json:"b3_raw_consume"`
	S3     ConsumeResult   `json:"s3_ledger_consume"`
	// S3Variants are S3 with the inbox off, one event per transaction, and
	// duplicates on the topic.
	S3Variants []S3Variant `json:"s3_variants,omitempty"`
	S4         []E2EResult `json:"s4_end_to_end"`
	S5         Growth      `json:"s5_growth"`
	P1         []PeerDrain `json:"p1_peer_drains,omitempty"`
	// Seconds is how long each stage took, setup included.
	Seconds map[string]float64 `json:"stage_seconds"`
}

// Growth is S5: S2 and S4 again on tables with a long history.
type Growth struct {
	History     int     `json:"history"` // rows in the outbox and in the inbox
	SeedSeconds float64 `json:"seed_seconds"`
	// S2 is the median of S2Runs, the drains on the history; S2Base the
	// drains on a fresh database they alternated with.
	S2     DrainResult   `json:"s2_relay_drain"`
	S2Runs []DrainResult `json:"s2_runs,omitempty"`
	S2Base []DrainResult `json:"s2_without_history,omitempty"`
	// S4 are the runs on the history, every round's; Base the runs on fresh
	// databases they alternated with, Rounds of each. Pooled and BasePooled
	// are each side's runs as one per mode and load: their events' latencies
	// as one distribution, which history is judged by. (A report without
	// Base compared its one run per mode with S4's.)
	S4         []E2EResult `json:"s4_end_to_end"`
	Base       []E2EResult `json:"s4_without_history,omitempty"`
	Pooled     []E2EResult `json:"s4_pooled,omitempty"`
	BasePooled []E2EResult `json:"s4_without_history_pooled,omitempty"`
	Rounds     int         `json:"rounds,omitempty"`
}

// S2WithoutHistory is the median of the drains on a fresh database that
// S2's on the history alternated with, the figure S5's S2 is judged
// against; false when the report has none.
func (g Growth) S2WithoutHistory() (DrainResult, bool) {
	if len(g.S2Base) == 0 {
		return DrainResult{}, false
	}
	return median(g.S2Base, drainRate), true
}

// Row is one line of the table: a figure, and against its baseline the
// ratio and the target's verdict. Verdicts report; they never fail a run.
type Row struct {
	Stage    string   `json:"stage"`
	What     string   `json:"what"`
	Figure   string   `json:"figure"`
	P50      *Millis  `json:"p50_ms,omitempty"`
	P99      *Millis  `json:"p99_ms,omitempty"`
	Max      *Millis  `json:"max_ms,omitempty"`
	Baseline string   `json:"baseline,omitempty"`
	Ratio    *float64 `json:"ratio,omitempty"`
	Target   string   `json:"target,omitempty"`
	Verdict  string   `json:"verdict,omitempty"` // pass or miss
}

// Verdicts.
const (
	Pass = "pass"
	Miss = "miss"
)

// verdict is Pass when ok.
func verdict(ok bool) string {
	if ok {
		return Pass
	}
	return Miss
}

// ratio is a/b, or nil when b is not a positive finite number.
func ratio(a, b float64) *float64 {
	if b <= 0 || math.IsInf(b, 0) || math.IsNaN(a) {
		return nil
	}
	r := a / b
	return &r
}

// Table writes the report as the table `paylab bench` prints, then the
// notes and the machine.
func (r Report) Table(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "stage\twhat\tfigure\tp50\tp99\tmax\tvs\tratio\ttarget\tverdict")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Stage, row.What, row.Figure,
			fmtMillis(row.P50), fmtMillis(row.P99), fmtMillis(row.Max), dash(row.Baseline), fmtRatio(row.Ratio),
			dash(row.Target), dash(row.Verdict))
	}
	tw.Flush()
	passed, missed := r.verdicts()
	fmt.Fprintf(w, "targets: %d pass, %d miss (ratios from this one run)\n", passed, missed)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
	fmt.Fprintf(w, "machine: %s\n", r.Machine)
	fmt.Fprintf(w, "run: %s sizes, %s in all\n", r.Sizes.Name, (time.Duration(r.Seconds * float64(time.Second))).Round(time.Second))
}

func fmtMillis(m *Millis) string {
	switch {
	case m == nil:
		return "-"
	case math.IsInf(float64(*m), 1):
		return "never"
	case *m >= 1000:
		return fmt.Sprintf("%.2fs", float64(*m)/1000)
	case *m >= 10:
		return fmt.Sprintf("%.0fms", float64(*m))
	default:
		return fmt.Sprintf("%.1fms", float64(*m))
	}
}

func fmtRatio(r *float64) string {
	switch {
	case r == nil:
		return "-"
	case *r < 0.1:
		return fmt.Sprintf("%.4f", *r)
	default:
		return fmt.Sprintf("%.2f", *r)
	}
}

func dash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

// rate formats a throughput.
func rate(v float64, unit string) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f %s", v, unit)
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}

func ptr[T any](v T) *T { return &v }

// relaysN is "1 relay" or "n relays".
func relaysN(n int) string {
	if n == 1 {
		return "1 relay"
	}
	return fmt.Sprintf("%d relays", n)
}
