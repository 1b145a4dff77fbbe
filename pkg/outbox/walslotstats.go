package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
)

// SlotStats is the WAL relay's replication slot as the server reports it in
// pg_replication_slots.
type SlotStats struct {
	// Exists is false when the slot is missing (dropped, or not created
	// yet); every other field is then zero.
	Exists bool
	// Active is true while a walsender is connected to the slot: a reader
	// streams it.
	Active bool
	// WALStatus says whether the WAL the slot needs is still there:
	// "reserved" (within max_wal_size), "extended" (beyond it, kept for the
	// slot), "unreserved" (beyond max_slot_wal_keep_size: the next
	// checkpoint removes it unless the reader catches up first) or "lost"
	// (removed: the slot cannot be streamed any more). Empty while the
	// server does not know.
	WALStatus string
	// RetainedBytes is the WAL the server keeps for the slot: written since
	// its restart_lsn. This is the disk the slot costs, and what
	// max_slot_wal_keep_size limits. 0 once the slot is lost.
	RetainedBytes int64
	// LagBytes is the WAL written since the slot's confirmed position
	// (confirmed_flush_lsn): what a reader must decode to catch up. At most
	// RetainedBytes: the server keeps WAL from before the confirmed position
	// until it can restart decoding later.
	LagBytes int64
	// SafeWALSizeBytes is how much more WAL may be written before the slot
	// risks losing what it needs (safe_wal_size); nil when
	// max_slot_wal_keep_size is -1 (no limit) or the slot is lost.
	SafeWALSizeBytes *int64
}

// SlotStats reads the state of WALConfig.Slot in one query. A missing slot
// is not an error: it returns SlotStats{Exists: false}.
func (r *WALRelay) SlotStats(ctx context.Context) (SlotStats, error) {
	s := SlotStats{Exists: true}
	var status *string
	err := r.pool.QueryRow(ctx, `SELECT active, wal_status,
			COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint,
			COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::bigint,
			safe_wal_size
		FROM pg_replication_slots WHERE slot_name = $1`, r.cfg.Slot).
		Scan(&s.Active, &status, &s.RetainedBytes, &s.LagBytes, &s.SafeWALSizeBytes)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return SlotStats{}, nil
	case err != nil:
		return SlotStats{}, fmt.Errorf("reading replication slot %s: %w", r.cfg.Slot, err)
	}
	if status != nil {
		s.WALStatus = *status
	}
	return s, nil
}

// SlotLag returns how many bytes of WAL were written since the slot's
// confirmed position: what a reader would have to decode to catch up. The
// server keeps more than that for the slot (SlotStats.RetainedBytes). 0
// when the slot is missing.
func (r *WALRelay) SlotLag(ctx context.Context) (int64, error) {
	s, err := r.SlotStats(ctx)
	return s.LagBytes, err
}

// slotStatsLoop refreshes the slot gauges every StatsInterval, on the
// reader and on the standbys alike, and logs the slot's changes of state.
// A failed read keeps the last values.
func (r *WALRelay) slotStatsLoop(ctx context.Context) error {
	ticker := time.NewTicker(r.cfg.StatsInterval)
	defer ticker.Stop()
	var last *SlotStats
	for {
		s, err := r.SlotStats(ctx)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				r.log.WarnContext(ctx, "reading the replication slot's state failed", "error", err)
			}
		default:
			r.wal.slot.set(s)
			if last == nil || s.Exists != last.Exists || s.WALStatus != last.WALStatus {
				r.logSlotState(ctx, s, last != nil)
			}
			last = &s
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// logSlotState logs a new state of the slot: always when it is missing or
// its WAL is at risk, otherwise only as a change from an earlier reading.
func (r *WALRelay) logSlotState(ctx context.Context, s SlotStats, changed bool) {
	switch {
	case !s.Exists:
		r.log.ErrorContext(ctx, "the replication slot is missing: nothing is streamed until SetupWAL creates it again")
	case s.WALStatus == "lost":
		r.log.ErrorContext(ctx, "the replication slot lost WAL it needs and cannot be streamed: drop it and run SetupWAL again")
	case s.WALStatus == "unreserved":
		r.log.WarnContext(ctx, "the replication slot holds more WAL than max_slot_wal_keep_size: the next checkpoint may remove it",
			"retained_bytes", s.RetainedBytes)
	case changed:
		r.log.InfoContext(ctx, "the replication slot's state changed", "wal_status", s.WALStatus, "retained_bytes", s.RetainedBytes)
	}
}

// walStatuses are the values of pg_replication_slots.wal_status.
var walStatuses = []string{"reserved", "extended", "unreserved", "lost"}

// slotMetrics are the slot's gauges, labelled with its name: the slot
// belongs to the whole server, and every relay sharing it reports the same
// values.
type slotMetrics struct {
	retained prometheus.Gauge
	lag      prometheus.Gauge
	status   *prometheus.GaugeVec
	exists   prometheus.Gauge
	active   prometheus.Gauge
	safeSize *prometheus.GaugeVec // no variable label: absent while the server reports no limit
}

// newSlotMetrics returns the gauges of slot, named prefix + "slot_…".
func newSlotMetrics(prefix, slot string) slotMetrics {
	l := prometheus.Labels{"slot": slot}
	p := prefix + "slot_"
	m := slotMetrics{
		retained: prometheus.NewGauge(prometheus.GaugeOpts{Name: p + "retained_wal_bytes", ConstLabels: l,
			Help: "WAL the server keeps for the slot (pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)); 0 when the slot is missing or lost."}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{Name: p + "lag_bytes", ConstLabels: l,
			Help: "WAL written since the slot's confirmed position (pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)): what a reader must decode to catch up; 0 when the slot is missing."}),
		status: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: p + "wal_status", ConstLabels: l,
			Help: "1 for the slot's wal_status (reserved, extended, unreserved, lost), 0 for the others; all 0 while it is unknown or the slot is missing."},
			[]string{"status"}),
		exists: prometheus.NewGauge(prometheus.GaugeOpts{Name: p + "exists", ConstLabels: l,
			Help: "1 while the slot exists, 0 when it is missing."}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{Name: p + "active", ConstLabels: l,
			Help: "1 while a walsender is connected to the slot (pg_replication_slots.active): a reader streams it."}),
		safeSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: p + "safe_wal_size_bytes", ConstLabels: l,
			Help: "WAL that may still be written before the slot risks losing what it needs (safe_wal_size); absent when max_slot_wal_keep_size is -1 or the slot is lost or missing."},
			nil),
	}
	for _, st := range walStatuses {
		m.status.WithLabelValues(st)
	}
	return m
}

func (m slotMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.retained, m.lag, m.status, m.exists, m.active, m.safeSize}
}

// set records one reading of the slot.
func (m slotMetrics) set(s SlotStats) {
	m.retained.Set(float64(s.RetainedBytes))
	m.lag.Set(float64(s.LagBytes))
	m.exists.Set(boolGauge(s.Exists))
	m.active.Set(boolGauge(s.Active))
	for _, st := range walStatuses {
		m.status.WithLabelValues(st).Set(boolGauge(s.WALStatus == st))
	}
	if s.SafeWALSizeBytes == nil {
		m.safeSize.Reset()
	} else {
		m.safeSize.WithLabelValues().Set(float64(*s.SafeWALSizeBytes))
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
