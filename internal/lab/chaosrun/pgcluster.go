package chaosrun

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/lab/pgha"
	"github.com/paylab/paylab/internal/platform/migrate"
)

// haSlot is the WAL relays' slot on a Patroni cluster: the permanent slot
// scripts/pgha.sh configures (in the database orders), which Patroni copies
// to the replicas, so that it exists on whichever member is promoted.
const haSlot = "outbox_wal_relay"

// haPublication is the WAL relays' default publication (RELAY_PUBLICATION).
const haPublication = "outbox_wal"

// deployHA starts a private Patroni cluster of three replicating as sc.pg,
// on free ports and for sc alone, puts the three databases on it (every
// process lists the three members with target_session_attrs=read-write),
// and deploys sc on it. The deployment's stop removes the cluster.
func (e *Env) deployHA(ctx context.Context, sc Scenario) (*Deployment, error) {
	if _, err := exec.LookPath("patroni"); err != nil {
		return nil, skip("needs Patroni and etcd (Debian's patroni and etcd-server packages) for its PostgreSQL cluster")
	}
	c, err := pgha.New(sc.pg)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Deployment, error) {
		return nil, errors.Join(err, c.Remove())
	}
	if err := c.Start(); err != nil {
		return fail(fmt.Errorf("starting the Patroni cluster: %w", err))
	}
	wal := e.RelayMode == RelayWAL
	urls, err := haDatabases(ctx, c, wal)
	if err != nil {
		return fail(err)
	}
	o := sc.opts
	o.databases = urls
	if wal {
		o.slot = haSlot
	}
	d, err := e.deploy(ctx, sc.Name, o)
	if err != nil {
		return fail(err)
	}
	d.HA = c
	stop := d.stop
	d.stop = func() {
		stop()
		_ = c.Remove()
	}
	return d, nil
}

// haDatabases creates paylab's three databases on the cluster, migrated,
// their roles granted, and returns their owners' URLs, listing every member,
// by service. It waits until the cluster is whole again: Patroni creates the
// permanent slot once the database orders exists and restarts each replica
// to copy it there, and the leader goes without a synchronous standby
// meanwhile. In WAL mode the publication exists and the slot is advanced
// past its creation, so the relays never decode a change older than their
// publication.
func haDatabases(ctx context.Context, c *pgha.Cluster, wal bool) (map[string]string, error) {
	dbs := migrate.Defaults()
	for i := range dbs {
		dbs[i].Replication = wal && dbs[i].Name == "orders"
	}
	admin := c.URL("postgres")
	if err := migrate.Bootstrap(ctx, admin, dbs); err != nil {
		return nil, fmt.Errorf("creating the databases on the cluster: %w", err)
	}
	urls := map[string]string{}
	for _, db := range dbs {
		owner, err := migrate.URL(admin, db.Name, db.Role, db.Password)
		if err != nil {
			return nil, err
		}
		if _, err := migrate.Up(ctx, owner, db.Name); err != nil {
			return nil, err
		}
		if err := migrate.Grant(ctx, owner, db.Name); err != nil {
			return nil, err
		}
		urls[db.Name] = owner
	}
	if urls["orders"] == "" {
		return nil, errors.New("no orders database among migrate.Defaults")
	}
	if err := haReady(ctx, c, wal, urls["orders"]); err != nil {
		return nil, err
	}
	return urls, nil
}

// haReady waits for the permanent slot on every member and the cluster
// whole, and in WAL mode prepares the slot for the relays.
func haReady(ctx context.Context, c *pgha.Cluster, wal bool, owner string) error {
	role := "orders"
	for m := 1; m <= pgha.Members; m++ {
		if err := await(ctx, 3*time.Minute, fmt.Sprintf("the permanent slot %s on member %d", haSlot, m), func() bool {
			return hasSlot(ctx, c.MemberURL(m, "postgres"), haSlot)
		}); err != nil {
			return err
		}
	}
	if err := awaitWhole(ctx, c); err != nil {
		return err
	}
	if !wal {
		return nil
	}
	conn, err := pgx.Connect(ctx, owner)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE PUBLICATION "+pgx.Identifier{haPublication}.Sanitize()+
		" FOR TABLE outbox WITH (publish = 'insert')"); err != nil {
		return fmt.Errorf("creating the publication: %w", err)
	}
	su, err := pgx.Connect(ctx, c.URL("orders"))
	if err != nil {
		return err
	}
	defer su.Close(context.WithoutCancel(ctx))
	if _, err := su.Exec(ctx, "SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())", haSlot); err != nil {
		return fmt.Errorf("advancing the slot past the publication: %w", err)
	}
	// The WAL relays (here as the owner) publish a transaction once the
	// synchronous standby flushed it, which they read in
	// pg_stat_replication: without pg_read_all_stats they see no standby
	// and hold every event (paylab init grants it the relay role).
	if _, err := su.Exec(ctx, "GRANT pg_read_all_stats TO "+pgx.Identifier{role}.Sanitize()); err != nil {
		return fmt.Errorf("granting the relays pg_read_all_stats: %w", err)
	}
	return nil
}

// awaitWhole waits until the cluster has a leader streaming to both
// replicas, one of them its synchronous standby (Patroni's and
// PostgreSQL's) unless it replicates asynchronously.
func awaitWhole(ctx context.Context, c *pgha.Cluster) error {
	return await(ctx, 3*time.Minute, "a leader streaming to both replicas", func() bool {
		leader := c.Leader(ctx)
		if leader == 0 {
			return false
		}
		conn, err := pgx.Connect(ctx, c.MemberURL(leader, "postgres"))
		if err != nil {
			return false
		}
		defer conn.Close(context.WithoutCancel(ctx))
		var streaming, sync int
		if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'streaming'),
			count(*) FILTER (WHERE state = 'streaming' AND sync_state = 'sync') FROM pg_stat_replication`).Scan(&streaming, &sync); err != nil {
			return false
		}
		if streaming < pgha.Members-1 {
			return false
		}
		s := c.SynchronousStandby(ctx)
		async := s == 0 && sync == 0
		return async || (s != 0 && sync == 1)
	})
}

// failover is what a leader change under load measured.
type failover struct {
	old, leader int           // the members that led before and after
	elected     time.Duration // from the fault to a new leader in Patroni
	writable    time.Duration // from the fault to the first payment committed on the new leader
}

func (f failover) String() string {
	return fmt.Sprintf("pg%d → pg%d: elected after %s, payments committed again after %s",
		f.old, f.leader, f.elected.Round(100*time.Millisecond), f.writable.Round(100*time.Millisecond))
}

// awaitFailover waits, from the fault at since, until a member other than
// old leads and a payment placed after since is committed on it.
func awaitFailover(ctx context.Context, d *Deployment, old int, since time.Time) (failover, error) {
	f := failover{old: old}
	if err := await(ctx, 2*time.Minute, "a new leader", func() bool {
		f.leader = d.HA.Leader(ctx)
		return f.leader != 0 && f.leader != old
	}); err != nil {
		return f, err
	}
	f.elected = time.Since(since)
	d.mark(fmt.Sprintf("pg%d leads", f.leader))
	if err := await(ctx, 2*time.Minute, "a payment committed on the new leader", func() bool {
		n, err := ordersSince(ctx, d.HA.MemberURL(f.leader, "postgres"), since)
		return err == nil && n > 0
	}); err != nil {
		return f, err
	}
	f.writable = time.Since(since)
	d.markEnd("payments committed again")
	return f, nil
}

// ordersSince counts the orders created since t on the server at url (a
// superuser URL of any database: it reads the database orders).
func ordersSince(ctx context.Context, url string, t time.Time) (int, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return 0, err
	}
	cfg.Database = "orders"
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int
	err = conn.QueryRow(cctx, "SELECT count(*) FROM orders WHERE created_at > $1", t).Scan(&n)
	return n, err
}

func hasSlot(ctx context.Context, url, slot string) bool {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, url)
	if err != nil {
		return false
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var ok bool
	err = conn.QueryRow(cctx, "SELECT EXISTS (SELECT FROM pg_replication_slots WHERE slot_name = $1)", slot).Scan(&ok)
	return err == nil && ok
}

// await polls ok until it holds, for at most limit.
func await(ctx context.Context, limit time.Duration, what string, ok func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for !ok() {
		pause(ctx, 100*time.Millisecond)
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		}
	}
	return nil
}
