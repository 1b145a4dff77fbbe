package console

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/internal/lab/reconcile"
	"github.com/paylab/paylab/internal/platform/admin"
	"github.com/paylab/paylab/internal/platform/broker"
)

// collector reads the counters of every stage: the databases, the topic's
// end offsets and the processes' admin listeners.
type collector struct {
	d    Deployment
	src  reconcile.Sources
	log  *slog.Logger
	http *http.Client

	pools map[string]*pgxpool.Pool // by database: orders, ledger, notifications
	kafka sarama.Client

	rates    rates
	started  map[string]float64 // process start time last seen, by process name
	restarts map[string]int
	problems map[string]bool // last second's, logged when they appeared
}

func newCollector(d Deployment, log *slog.Logger) (*collector, error) {
	src := d.Sources()
	c := &collector{d: d, src: src, log: log, http: &http.Client{Timeout: 2 * time.Second}, pools: map[string]*pgxpool.Pool{},
		rates: rates{}, started: map[string]float64{}, restarts: map[string]int{}}
	for db, u := range map[string]string{"orders": src.OrdersURL, "ledger": src.LedgerURL, "notifications": src.NotificationsURL} {
		cfg, err := pgxpool.ParseConfig(u)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("the %s database URL: %w", db, err)
		}
		cfg.MaxConns = 2
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg) // connects lazily
		if err != nil {
			c.close()
			return nil, fmt.Errorf("the %s database: %w", db, err)
		}
		c.pools[db] = pool
	}
	return c, nil
}

func (c *collector) close() {
	for _, p := range c.pools {
		p.Close()
	}
	if c.kafka != nil {
		_ = c.kafka.Close()
	}
}

// problems records what could not be read: a fixed text for the page, the
// error itself (which may name a host or a role) for the log only.
type problems struct {
	mu   sync.Mutex
	list []string
	errs map[string]error
}

func (p *problems) add(text string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.errs == nil {
		p.errs = map[string]error{}
	}
	p.list = append(p.list, text)
	p.errs[text] = err
}

// logNew logs the problems that were not there the second before, once.
func (c *collector) logNew(ctx context.Context, p *problems) {
	now := make(map[string]bool, len(p.list))
	for _, text := range p.list {
		if !c.problems[text] {
			c.log.WarnContext(ctx, "console: "+text, "error", p.errs[text])
		}
		now[text] = true
	}
	c.problems = now
}

// collect reads every counter, concurrently, within a second or two.
func (c *collector) collect(ctx context.Context) State {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	now := time.Now()
	st := State{At: now}
	probs := &problems{}
	relayMode := c.d.Settings().RelayMode
	procs := c.d.Procs(ctx)
	scrapes := make([]scrape, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { scrapes[i] = c.scrape(ctx, p) })
	}
	wg.Go(func() {
		switch {
		case !c.orders(ctx, &st, probs):
		case relayMode == RelayWAL:
			c.walSlot(ctx, &st, probs)
		default:
			c.leases(ctx, &st, probs)
		}
	})
	wg.Go(func() { c.consumer(ctx, "ledger", `SELECT count(*) FROM journal_entries`, &st.Ledger, probs) })
	wg.Go(func() { c.consumer(ctx, "notifications", `SELECT count(*) FROM notifications`, &st.Notify, probs) })
	wg.Go(func() { c.topic(&st.Kafka, probs) })
	wg.Wait()

	for i, p := range procs {
		s := scrapes[i]
		v := ProcView{Name: p.Name, Role: p.Role, Up: s.up, Points: PointsIn(p.Role, relayMode)}
		if start, ok := s.metric("process_start_time_seconds"); ok {
			if last, seen := c.started[p.Name]; seen && last != start {
				c.restarts[p.Name]++
			}
			c.started[p.Name] = start
		}
		v.Restarts = c.restarts[p.Name]
		switch p.Role {
		case RoleOrders:
			st.Orders.NaivePublished, _ = s.metric("paylab_orders_naive_publish_total")
		case RoleRelay:
			v.Published, _ = s.metric(metricPublished)
			v.Rate = c.rates.observe("relay/"+p.Name, now, v.Published)
			if reading, ok := s.metric(metricWALActiveReader); ok {
				v.WALRole = WALStandby
				if reading == 1 {
					v.WALRole = WALReader
				}
			}
		case RoleLedger, RoleNotifications:
			cons := &st.Ledger
			if p.Role == RoleNotifications {
				cons = &st.Notify
			}
			cons.Up = s.up
			cons.Lag, _ = s.metric("paylab_inbox_consumer_lag")
			cons.Duplicates, _ = s.metric("paylab_inbox_duplicates_total")
		}
		if !s.up {
			probs.add(p.Name+" does not answer", s.err)
		}
		st.Procs = append(st.Procs, v)
	}
	st.Orders.Rate = c.rates.observe("captures", now, float64(st.Orders.Captures))
	st.Outbox.Rate = c.rates.observe("dispatched", now, float64(st.Outbox.Dispatched))
	st.Kafka.Rate = c.rates.observe("kafka", now, float64(st.Kafka.Total))
	st.Ledger.Rate = c.rates.observe("ledger", now, float64(st.Ledger.Effects))
	st.Notify.Rate = c.rates.observe("notifications", now, float64(st.Notify.Effects))
	st.Problems = probs.list
	c.logNew(ctx, probs)
	return st
}

// The relays' metrics (pkg/outbox, under its default prefix paylab_outbox,
// which the relay process keeps).
const (
	metricPublished = "paylab_outbox_published_total"
	// metricWALActiveReader is registered by the WAL relay only: 1 while
	// it holds the reader lease and streams the slot, 0 on a standby.
	metricWALActiveReader = "paylab_outbox_wal_active_reader"
)

// scrape is one process's readiness and metrics.
type scrape struct {
	up      bool
	err     error
	metrics []byte
}

func (s scrape) metric(name string) (float64, bool) {
	return admin.SumSamples(bytes.NewReader(s.metrics), name)
}

func (c *collector) scrape(ctx context.Context, p Proc) scrape {
	get := func(path string) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(p.Admin, "/")+path, nil)
		if err != nil {
			return nil, err
		}
		res, err := c.http.Do(req)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
		if err == nil && res.StatusCode/100 != 2 {
			err = fmt.Errorf("%s: %s", path, res.Status)
		}
		return b, err
	}
	var s scrape
	if _, s.err = get("/readyz"); s.err == nil {
		s.up = true
	}
	if b, err := get("/metrics"); err == nil {
		s.metrics = b
	}
	return s
}

// orders reads the captures and the outbox; false when the orders
// database does not answer.
func (c *collector) orders(ctx context.Context, st *State, probs *problems) bool {
	err := c.pools["orders"].QueryRow(ctx, `
		SELECT (SELECT count(*) FROM orders WHERE status <> 'authorized'),
		       count(*) FILTER (WHERE dispatched_at IS NULL AND parked_at IS NULL),
		       COALESCE(EXTRACT(EPOCH FROM now() - min(created_at) FILTER (WHERE dispatched_at IS NULL AND parked_at IS NULL)), 0)::float8,
		       count(*) FILTER (WHERE dispatched_at IS NOT NULL),
		       count(*) FILTER (WHERE parked_at IS NOT NULL)
		FROM outbox`).Scan(&st.Orders.Captures, &st.Outbox.Pending, &st.Outbox.OldestAge, &st.Outbox.Dispatched, &st.Outbox.Parked)
	if err != nil {
		probs.add("the orders database does not answer", err)
		return false
	}
	return true
}

// leases reads the polling relays' leases: held and expired, per owner.
func (c *collector) leases(ctx context.Context, st *State, probs *problems) {
	rows, err := c.pools["orders"].Query(ctx, `
		SELECT lease_owner, count(*) FILTER (WHERE leased_until > now()), count(*) FILTER (WHERE leased_until <= now())
		FROM outbox WHERE dispatched_at IS NULL AND parked_at IS NULL AND lease_owner IS NOT NULL
		GROUP BY lease_owner ORDER BY lease_owner`)
	if err == nil {
		st.Leases, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Lease, error) {
			var l Lease
			return l, r.Scan(&l.Owner, &l.Held, &l.Expired)
		})
	}
	if err != nil {
		probs.add("the outbox leases could not be read", err)
	}
}

// consumer reads a consumer's inbox and its effects (effects counts them).
func (c *collector) consumer(ctx context.Context, db, effects string, v *Consumer, probs *problems) {
	pool := c.pools[db]
	err := pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE status = 'processed'), count(*) FILTER (WHERE status = 'received'),
		       count(*) FILTER (WHERE status = 'failed')
		FROM inbox`).Scan(&v.Processed, &v.Parked, &v.DeadLettered)
	if err == nil {
		err = pool.QueryRow(ctx, effects).Scan(&v.Effects)
	}
	if err != nil {
		probs.add("the "+db+" database does not answer", err)
	}
}

// topic reads the end offset of every partition of the topic.
func (c *collector) topic(v *KafkaView, probs *problems) {
	if c.kafka == nil {
		client, err := sarama.NewClient(c.src.Brokers, kafkaConfig())
		if err != nil {
			probs.add("Kafka does not answer", err)
			return
		}
		c.kafka = client
	}
	if err := c.offsets(v); err != nil {
		// A broker that restarted: a fresh client next second.
		_ = c.kafka.Close()
		c.kafka = nil
		probs.add("Kafka does not answer", err)
	}
}

func (c *collector) offsets(v *KafkaView) error {
	parts, err := c.kafka.Partitions(c.src.Topic)
	if err != nil {
		return err
	}
	v.Partitions = make([]int64, len(parts))
	for i, p := range parts {
		end, err := c.kafka.GetOffset(c.src.Topic, p, sarama.OffsetNewest)
		if err != nil {
			return err
		}
		v.Partitions[i] = end
		v.Total += end
	}
	return nil
}

// kafkaConfig gives up quickly: a broker that is down shows as such within
// the second, rather than stalling the counters.
func kafkaConfig() *sarama.Config {
	cfg := broker.Config("paylab-console")
	cfg.Net.DialTimeout, cfg.Net.ReadTimeout, cfg.Net.WriteTimeout = 2*time.Second, 2*time.Second, 2*time.Second
	cfg.Metadata.Retry.Max, cfg.Metadata.Retry.Backoff = 1, 100*time.Millisecond
	cfg.Metadata.Timeout = 2 * time.Second
	return cfg
}
