package outbox

import "github.com/prometheus/client_golang/prometheus"

// metrics are the relay's Prometheus metrics; doc.go lists them.
type metrics struct {
	pending            prometheus.Gauge
	oldestPendingAge   prometheus.Gauge
	parked             prometheus.Gauge
	published          prometheus.Counter
	publishErrors      *prometheus.CounterVec
	parkedTotal        prometheus.Counter
	leaseReclaims      prometheus.Counter
	leaseRenewals      prometheus.Counter
	batchSize          prometheus.Histogram
	publishLatency     prometheus.Histogram
	publishDuration    prometheus.Histogram
	relayErrors        prometheus.Counter
	retentionDeleted   prometheus.Counter
	listenerReconnects prometheus.Counter
	brokerOutage       prometheus.Gauge
	outageBatches      prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns, sub = "paylab", "outbox"
	m := &metrics{
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "pending",
			Help: "Events committed but not yet published (parked events excluded)."}),
		oldestPendingAge: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "oldest_pending_age_seconds",
			Help: "Age of the oldest pending event, on the database clock; 0 when nothing is pending."}),
		parked: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "parked",
			Help: "Parked events: failed permanently, each one blocking the later events of its aggregate."}),
		published: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "published_total",
			Help: "Events acknowledged by the broker and marked dispatched."}),
		publishErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "publish_errors_total",
			Help: "Events the broker did not acknowledge, by kind (transient: retried with backoff; permanent: parked)."},
			[]string{"kind"}),
		parkedTotal: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "parked_total",
			Help: "Events parked by this relay (permanent error or too many attempts)."}),
		leaseReclaims: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "lease_reclaims_total",
			Help: "Events claimed whose previous lease had expired without completion (taken over from a dead or stalled relay)."}),
		leaseRenewals: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "lease_renewals_total",
			Help: "Lease renewals of batches whose acknowledgements outlasted half the lease TTL."}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "batch_size",
			Help:    "Events per claimed batch.",
			Buckets: []float64{1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000}}),
		publishLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "publish_latency_seconds",
			Help:    "Time from an event's insert to its dispatch being recorded after the broker's ack (database clock).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}}),
		publishDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "publish_duration_seconds",
			Help:    "Time to publish one batch and collect its acks.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12)}),
		relayErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "relay_errors_total",
			Help: "Failed relay rounds (database errors, injected faults); the relay retries after a poll interval."}),
		retentionDeleted: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "retention_deleted_total",
			Help: "Dispatched events deleted by the retention job."}),
		listenerReconnects: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "listener_reconnects_total",
			Help: "Times the LISTEN connection was lost and reopened."}),
		brokerOutage: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "broker_outage",
			Help: "1 while the relay sees a broker outage (its last batches failed entirely) and pauses between probes, else 0."}),
		outageBatches: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "outage_batches_total",
			Help: "Batches in which every event failed transiently: taken for a broker outage, attempts not counted."}),
	}
	for _, c := range []prometheus.Collector{m.pending, m.oldestPendingAge, m.parked, m.published, m.publishErrors,
		m.parkedTotal, m.leaseReclaims, m.leaseRenewals, m.batchSize, m.publishLatency, m.publishDuration, m.relayErrors,
		m.retentionDeleted, m.listenerReconnects, m.brokerOutage, m.outageBatches} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.publishErrors.WithLabelValues("transient")
	m.publishErrors.WithLabelValues("permanent")
	return m, nil
}
