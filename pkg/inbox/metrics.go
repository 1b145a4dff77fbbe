package inbox

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// metrics are the inbox's Prometheus series. Labels stay low-cardinality:
// event type, dead-letter reason, partition.
type metrics struct {
	processed    *prometheus.CounterVec
	duplicates   *prometheus.CounterVec
	parked       prometheus.Counter
	failed       *prometheus.CounterVec
	deadLettered *prometheus.CounterVec
	pruned       prometheus.Counter
	latency      *prometheus.HistogramVec
	lag          *prometheus.GaugeVec
}

// newMetrics registers the inbox metrics, named prefix_<name>.
func newMetrics(reg prometheus.Registerer, prefix string, types []string) (*metrics, error) {
	m := &metrics{
		processed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_processed_total", Help: "Events whose effect committed.",
		}, []string{"type"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_duplicates_total", Help: "Deliveries skipped because the event was seen before.",
		}, []string{"type"}),
		parked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: prefix + "_parked_total", Help: "Events held because an earlier event of their aggregate had not been applied.",
		}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_failed_total", Help: "Failed handler attempts and undecodable messages.",
		}, []string{"reason"}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_dead_lettered_total", Help: "Messages sent to the dead-letter topic.",
		}, []string{"reason"}),
		pruned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: prefix + "_pruned_total", Help: "Processed inbox rows deleted after the retention window.",
		}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    prefix + "_handler_duration_seconds",
			Help:    "Duration of successful handler transactions.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"type"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: prefix + "_consumer_lag",
			Help: "Messages between a partition's high-water mark and the last marked offset.",
		}, []string{"topic", "partition"}),
	}
	for _, c := range []prometheus.Collector{m.processed, m.duplicates, m.parked, m.failed, m.deadLettered, m.pruned, m.latency, m.lag} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Export zeros for the known label values, so dashboards and alerts see
	// the series before the first event.
	for _, t := range types {
		m.processed.WithLabelValues(t)
		m.duplicates.WithLabelValues(t)
	}
	for _, r := range []string{ReasonUndecodable, ReasonUnknownType, ReasonRejected, ReasonHandlerFailed} {
		m.failed.WithLabelValues(r)
		m.deadLettered.WithLabelValues(r)
	}
	return m, nil
}

// Counts is a snapshot of a Runner's counters, summed over their labels.
type Counts struct {
	Processed, Duplicates, Parked, Failed, DeadLettered, Pruned int
}

func (m *metrics) counts() Counts {
	return Counts{
		Processed:    sum(m.processed),
		Duplicates:   sum(m.duplicates),
		Parked:       sum(m.parked),
		Failed:       sum(m.failed),
		DeadLettered: sum(m.deadLettered),
		Pruned:       sum(m.pruned),
	}
}

func sum(c prometheus.Collector) int {
	ch := make(chan prometheus.Metric, 16)
	go func() { c.Collect(ch); close(ch) }()
	var total float64
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) == nil && d.Counter != nil {
			total += d.Counter.GetValue()
		}
	}
	return int(total)
}

func handlerTypes(h map[string]Handler) []string {
	types := make([]string, 0, len(h))
	for t := range h {
		types = append(types, t)
	}
	return types
}
