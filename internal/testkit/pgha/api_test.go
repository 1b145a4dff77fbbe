package pgha_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paylab/paylab/internal/lab/localstack"
	"github.com/paylab/paylab/internal/lab/pgha"
	"github.com/paylab/paylab/internal/platform/apikey"
	"github.com/paylab/paylab/internal/platform/migrate"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// The orders API's deadlines in this test: a request waits at most
// acquireTimeout for a connection and requestTimeout in all.
const (
	acquireTimeout = 2 * time.Second
	requestTimeout = 5 * time.Second
)

// TestOrdersAPIFollowsTheLeader: the orders API, its DATABASE_URL listing
// the three members with target_session_attrs=read-write, takes a stream of
// payments while the leader's PostgreSQL is SIGKILLed. During the failover
// the payments fail fast with 503 problem+json and Retry-After — never a 500,
// never a request longer than the request deadline — and /readyz reports not
// ready; once Patroni promoted the synchronous standby the same process,
// not restarted, captures payments again and is ready, and every payment it
// acknowledged with 201 is on the new leader.
func TestOrdersAPIFollowsTheLeader(t *testing.T) {
	c := setup(t, pgha.Synchronous)
	ctx := testenv.Context(t)
	owner := ordersDatabase(ctx, t, c)
	key := issueKey(ctx, t, owner)
	api, adminURL := startOrdersAPI(t, c)

	old := c.Leader(ctx)
	if old == 0 {
		t.Fatal("no leader")
	}
	s := startPayments(api, key, 4)
	t.Cleanup(func() { s.stop() })
	testenv.Eventually(t, time.Minute, "payments captured before the fault", func() bool { return s.count(http.StatusCreated) >= 20 })

	// Patroni promotes only the synchronous standby: one must be named and
	// streaming when the leader dies, or Patroni restarts the old leader
	// in place instead.
	pool, err := pgxpool.New(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	testenv.Eventually(t, 2*time.Minute, "a synchronous standby", func() bool { return synchronized(ctx, c, pool) != 0 })

	ready := watchReady(adminURL)
	killed := time.Now()
	if err := c.KillPostmaster(old); err != nil {
		t.Fatal(err)
	}
	var leader int
	testenv.Eventually(t, 2*time.Minute, "a leader that takes writes", func() bool {
		leader = c.Leader(ctx)
		if leader == old {
			// Restarted in place (its Patroni found no healthy synchronous
			// standby): the API must follow it all the same.
			return hasTable(ctx, c.MemberURL(leader, "orders"), "orders") && writable(ctx, c.MemberURL(leader, "postgres"))
		}
		return leader != 0
	})
	if leader == old {
		t.Logf("Patroni restarted the old leader pg%d in place instead of failing over", old)
	}
	elected := time.Since(killed)
	testenv.Eventually(t, 2*time.Minute, "a payment captured after the failover", func() bool { return s.createdAfter(killed) > 0 })
	serving := time.Since(killed)
	testenv.Eventually(t, time.Minute, "the API ready again", func() bool { return ready.last() == http.StatusOK })
	// A few more on the new leader, then stop.
	after := s.count(http.StatusCreated)
	testenv.Eventually(t, time.Minute, "more payments on the new leader", func() bool { return s.count(http.StatusCreated) >= after+20 })
	results := s.stop()
	readiness := ready.stop()

	codes := map[int]int{}
	var slowest time.Duration
	for _, r := range results {
		codes[r.status]++
		slowest = max(slowest, r.took)
		switch {
		case r.err != nil:
			t.Errorf("a request failed without an answer after %s: %v", r.took, r.err)
		case r.status == http.StatusServiceUnavailable && (r.contentType != "application/problem+json" || r.retryAfter == ""):
			t.Errorf("a 503 with Content-Type %q and Retry-After %q, want problem+json with Retry-After", r.contentType, r.retryAfter)
		case r.status != http.StatusCreated && r.status != http.StatusServiceUnavailable:
			t.Errorf("a payment answered %d (%s)", r.status, r.body)
		}
	}
	if slowest > requestTimeout+2*time.Second {
		t.Errorf("the slowest request took %s, beyond the request deadline %s", slowest, requestTimeout)
	}
	if !slices.Contains(readiness, http.StatusServiceUnavailable) {
		t.Errorf("/readyz never reported not ready during the failover (saw %v)", compact(readiness))
	}
	t.Logf("leader pg%d killed: pg%d elected after %s, payments captured again after %s; %d payments: %d captured, %d answered 503; slowest %s; /readyz %v",
		old, leader, elected.Round(time.Millisecond), serving.Round(time.Millisecond), len(results),
		codes[http.StatusCreated], codes[http.StatusServiceUnavailable], slowest.Round(time.Millisecond), compact(readiness))

	// Synchronous replication: every 201 is on the new leader.
	var ids []string
	for _, r := range results {
		if r.status == http.StatusCreated {
			ids = append(ids, r.orderID)
		}
	}
	conn, err := pgx.Connect(ctx, c.MemberURL(leader, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var missing int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM unnest($1::uuid[]) a(id) WHERE NOT EXISTS (SELECT FROM orders o WHERE o.id = a.id)", ids).Scan(&missing); err != nil {
		t.Fatal(err)
	}
	if missing != 0 {
		t.Fatalf("%d of the %d payments acknowledged with 201 are not on the new leader pg%d", missing, len(ids), leader)
	}
}

// writable reports whether the member at url takes writes (not in recovery).
func writable(ctx context.Context, url string) bool {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return false
	}
	defer conn.Close(ctx)
	var recovering bool
	return conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovering) == nil && !recovering
}

// ordersDatabase creates the orders database on the cluster, migrated and
// its runtime roles granted, and returns its owner's URL listing every member.
func ordersDatabase(ctx context.Context, t *testing.T, c *pgha.Cluster) string {
	t.Helper()
	var db migrate.Database
	for _, d := range migrate.Defaults() {
		if d.Name == "orders" {
			db = d
		}
	}
	admin := c.URL("postgres")
	if err := migrate.Bootstrap(ctx, admin, []migrate.Database{db}); err != nil {
		t.Fatal(err)
	}
	owner, err := migrate.URL(admin, "orders", db.Role, db.Password)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Up(ctx, owner, "orders"); err != nil {
		t.Fatal(err)
	}
	if err := migrate.Grant(ctx, owner, "orders"); err != nil {
		t.Fatal(err)
	}
	// Patroni copies its permanent slot (in the database orders) to each
	// replica, restarting it, and names a synchronous standby again after.
	for m := 1; m <= pgha.Members; m++ {
		testenv.Eventually(t, 2*time.Minute, "the permanent slot on every member", func() bool {
			return hasSlot(ctx, c.MemberURL(m, "postgres"), "outbox_wal_relay")
		})
	}
	pool, err := pgxpool.New(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	testenv.Eventually(t, 2*time.Minute, "a synchronous standby", func() bool { return synchronized(ctx, c, pool) != 0 })
	return owner
}

func issueKey(ctx context.Context, t *testing.T, owner string) string {
	t.Helper()
	conn, err := pgx.Connect(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	key, _, err := apikey.NewStore(conn).Create(ctx, "mer_1", "failover test")
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// startOrdersAPI builds and starts `orders serve` on the cluster as its
// runtime role, and returns its public and admin base URLs once ready.
func startOrdersAPI(t *testing.T, c *pgha.Cluster) (api, admin string) {
	t.Helper()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "github.com/paylab/paylab/services/orders")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the orders API: %v\n%s", err, out)
	}
	dbURL, err := migrate.URL(c.URL("postgres"), "orders", "orders_api", "orders_api")
	if err != nil {
		t.Fatal(err)
	}
	ports, err := localstack.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	api, admin = fmt.Sprintf("http://127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	var out bytes.Buffer
	cmd := exec.Command(filepath.Join(bin, "orders"), "serve")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL,
		fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", ports[0]), fmt.Sprintf("ADMIN_ADDR=127.0.0.1:%d", ports[1]),
		"DATABASE_ACQUIRE_TIMEOUT="+acquireTimeout.String(), "REQUEST_TIMEOUT="+requestTimeout.String(),
		"API_RATE_LIMIT=100000", "API_RATE_BURST=100000", "LOG_LEVEL=warn")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("orders API output:\n%s", out.String())
		}
	})
	testenv.Eventually(t, time.Minute, "the orders API ready", func() bool {
		select {
		case <-done:
			t.Fatalf("the orders API exited:\n%s", out.String())
		default:
		}
		res, err := http.Get(admin + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return api, admin
}

// result is one payment's answer.
type result struct {
	at          time.Time // when it was sent
	took        time.Duration
	status      int
	contentType string
	retryAfter  string
	orderID     string
	body        string
	err         error
}

// payments is a stream of payments from a few workers, each placing one
// after the other.
type payments struct {
	mu      sync.Mutex
	results []result
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func startPayments(api, key string, workers int) *payments {
	ctx, cancel := context.WithCancel(context.Background())
	p := &payments{cancel: cancel}
	client := &http.Client{Timeout: 30 * time.Second}
	for w := range workers {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				r := pay(ctx, client, api, key, fmt.Sprintf("ha-%d-%d-%d", time.Now().UnixNano(), w, i))
				if ctx.Err() != nil {
					return
				}
				p.mu.Lock()
				p.results = append(p.results, r)
				p.mu.Unlock()
				if r.status == http.StatusServiceUnavailable || r.err != nil {
					time.Sleep(50 * time.Millisecond) // a client's pause before retrying
				}
			}
		}()
	}
	return p
}

func pay(ctx context.Context, client *http.Client, api, key, idem string) result {
	body := `{"customer_id":"cus_1","merchant_id":"mer_1","amount":1999,"currency":"EUR"}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, api+"/v1/payments", strings.NewReader(body))
	if err != nil {
		return result{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Idempotency-Key", idem)
	r := result{at: time.Now()}
	res, err := client.Do(req)
	r.took = time.Since(r.at)
	if err != nil {
		r.err = err
		return r
	}
	defer res.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(res.Body)
	r.status, r.contentType, r.retryAfter, r.body = res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Retry-After"), buf.String()
	if r.status == http.StatusCreated {
		var o struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(buf.Bytes(), &o)
		r.orderID = o.ID
	}
	return r
}

func (p *payments) count(status int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.results {
		if r.status == status {
			n++
		}
	}
	return n
}

func (p *payments) createdAfter(t time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.results {
		if r.status == http.StatusCreated && r.at.After(t) {
			n++
		}
	}
	return n
}

// stop ends the stream and returns every answer; it may be called again.
func (p *payments) stop() []result {
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.results
}

// readiness polls /readyz and keeps the statuses it saw, in order.
type readiness struct {
	mu       sync.Mutex
	statuses []int
	cancel   context.CancelFunc
	done     chan struct{}
}

func watchReady(admin string) *readiness {
	ctx, cancel := context.WithCancel(context.Background())
	r := &readiness{cancel: cancel, done: make(chan struct{})}
	client := &http.Client{Timeout: 3 * time.Second}
	go func() {
		defer close(r.done)
		for ctx.Err() == nil {
			status := 0
			if res, err := client.Get(admin + "/readyz"); err == nil {
				status = res.StatusCode
				res.Body.Close()
			}
			r.mu.Lock()
			r.statuses = append(r.statuses, status)
			r.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return r
}

func (r *readiness) last() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.statuses) == 0 {
		return 0
	}
	return r.statuses[len(r.statuses)-1]
}

func (r *readiness) stop() []int {
	r.cancel()
	<-r.done
	return r.statuses
}

// compact is the statuses without repeats: [200 503 200].
func compact(statuses []int) []int { return slices.Compact(slices.Clone(statuses)) }
