package outbox

import "github.com/prometheus/client_golang/prometheus"

// metrics are the Prometheus metrics both relays export; doc.go lists
// them. pollMetrics are the polling relay's own, walMetrics the WAL
// relay's.
type metrics struct {
	pending          prometheus.Gauge
	oldestPendingAge prometheus.Gauge
	parked           prometheus.Gauge
	published        prometheus.Counter
	publishErrors    *prometheus.CounterVec
	parkedTotal      prometheus.Counter
	batchSize        prometheus.Histogram
	publishLatency   prometheus.Histogram
	publishDuration  prometheus.Histogram
	relayErrors      prometheus.Counter
	retentionDeleted prometheus.Counter
	brokerOutage     prometheus.Gauge
	outageBatches    prometheus.Counter
}

// newMetrics registers the relay's metrics, named prefix_<name>.
func newMetrics(reg prometheus.Registerer, prefix string) (*metrics, error) {
	prefix += "_"
	m := &metrics{
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: prefix + "pending",
			Help: "Events committed but not yet published (parked events excluded)."}),
		oldestPendingAge: prometheus.NewGauge(prometheus.GaugeOpts{Name: prefix + "oldest_pending_age_seconds",
			Help: "Age of the oldest pending event, on the database clock; 0 when nothing is pending."}),
		parked: prometheus.NewGauge(prometheus.GaugeOpts{Name: prefix + "parked",
			Help: "Parked events: failed permanently, each one blocking the later events of its aggregate."}),
		published: prometheus.NewCounter(prometheus.CounterOpts{Name: prefix + "published_total",
			Help: "Events acknowledged by the broker and marked dispatched."}),
		publishErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: prefix + "publish_errors_total",
			Help: "Events the broker did not acknowledge, by kind (transient: retried with backoff; permanent: parked)."},
			[]string{"kind"}),
		parkedTotal: prometheus.NewCounter(prometheus.CounterOpts{Name: prefix + "parked_total",
			Help: "Events parked by this relay (permanent error or too many attempts)."}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Name: prefix + "batch_size",
			Help:    "Events per claimed batch.",
			Buckets: []float64{1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000}}),
		publishLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: prefix + "publish_latency_seconds",
			Help:    "Time from an event's insert to its dispatch being recorded after the broker's ack (database clock).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}}),
		publishDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: prefix + "publish_duration_seconds",
			Help:    "Time to publish one batch and collect its acks.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12)}),
		relayErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: prefix + "relay_errors_total",
			Help: "Failed relay rounds (database errors, injected faults); the relay retries after a poll interval."}),
		retentionDeleted: prometheus.NewCounter(prometheus.CounterOpts{Name: prefix + "retention_deleted_total",
			Help: "Dispatched events deleted by the retention job."}),
		brokerOutage: prometheus.NewGauge(prometheus.GaugeOpts{Name: prefix + "broker_outage",
			Help: "1 while the relay sees a broker outage (its last batches failed entirely) and pauses between probes, else 0."}),
		outageBatches: prometheus.NewCounter(prometheus.CounterOpts{Name: prefix + "outage_batches_total",
			Help: "Batches in which every event failed transiently: taken for a broker outage, attempts not counted."}),
	}
	for _, c := range []prometheus.Collector{m.pending, m.oldestPendingAge, m.parked, m.published, m.publishErrors,
		m.parkedTotal, m.batchSize, m.publishLatency, m.publishDuration, m.relayErrors,
		m.retentionDeleted, m.brokerOutage, m.outageBatches} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.publishErrors.WithLabelValues("transient")
	m.publishErrors.WithLabelValues("permanent")
	return m, nil
}

// pollMetrics are the polling relay's own metrics: its leases and its
// LISTEN connection.
type pollMetrics struct {
	leaseReclaims      prometheus.Counter
	leaseRenewals      prometheus.Counter
	leaseLost          prometheus.Counter
	listenerReconnects prometheus.Counter
}

// newPollMetrics registers the polling relay's own metrics, named
// prefix_<name>.
func newPollMetrics(reg prometheus.Registerer, prefix string) (pollMetrics, error) {
	prefix += "_"
	m := pollMetrics{
		leaseReclaims: prometheus.NewCounter(prometheus.CounterOpts{Name: prefix + "lease_reclaims_total",
			Help: "Events claimed whose previous lease had expired without completion (taken over from a dead or stalled relay)."}),
		leaseRenewals: prometheus.NewCounter(prometheus.CounterOpts{Name: prefix + "lease_renewals_total",
			Help: "Lease renewals of batches whose acknowledgements outlasted half the lease TTL."}),
		leaseLost: prometheus.NewCounter(prometheus.CounterOpts{Name: prefix + "lease_lost_total",
			Help: "Events whose outcome this relay could not record: its lease had expired and another relay took them (the relay stalled past its lease)."}),
		listenerReconnects: prometheus.NewCounter(prometheus.CounterOpts{Name: prefix + "listener_reconnects_total",
			Help: "Times the LISTEN connection was lost and reopened."}),
	}
	for _, c := range []prometheus.Collector{m.leaseReclaims, m.leaseRenewals, m.leaseLost, m.listenerReconnects} {
		if err := reg.Register(c); err != nil {
			return m, err
		}
	}
	return m, nil
}
