package chaosrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/lab/localstack"
)

// The chaos runner's handle on a private Patroni cluster: scripts/pgha.sh,
// driven through the same variables as internal/testkit/pgha's test harness,
// which the paylab binary may not link (internal/testkit is for tests).

// haMembers is the size of the cluster.
const haMembers = 3

// replication is the cluster's replication mode, scripts/pgha.sh's PG_SYNC.
type replication string

const (
	synchronous  replication = "on"  // synchronous_mode: no acknowledged commit lost by a failover
	asynchronous replication = "off" // a failover may lose what the replicas had not received
)

// haCluster is a private Patroni cluster of haMembers members, numbered from 1,
// on free ports, its state in a temporary folder.
type haCluster struct {
	dir      string
	env      []string
	ports    []int
	apiPorts []int
}

// newHACluster prepares (does not start) a private cluster replicating as r.
func newHACluster(r replication) (*haCluster, error) {
	dir, err := os.MkdirTemp("", "paylab-chaos-pgha-")
	if err != nil {
		return nil, err
	}
	c := &haCluster{dir: dir}
	free := func() (int, error) { return localstack.FreePort() }
	var ports, apiPorts []string
	for range haMembers {
		pg, err := free()
		if err != nil {
			return nil, err
		}
		api, err := free()
		if err != nil {
			return nil, err
		}
		c.ports, c.apiPorts = append(c.ports, pg), append(c.apiPorts, api)
		ports, apiPorts = append(ports, strconv.Itoa(pg)), append(apiPorts, strconv.Itoa(api))
	}
	etcd, err := free()
	if err != nil {
		return nil, err
	}
	etcdPeer, err := free()
	if err != nil {
		return nil, err
	}
	c.env = append(os.Environ(), "PAYLAB_STACK_DIR="+dir, "PG_SYNC="+string(r), "PAYLAB_PG_HA_SLOT="+haSlot,
		"PAYLAB_PG_HA_PORTS="+strings.Join(ports, ","), "PAYLAB_PG_HA_API_PORTS="+strings.Join(apiPorts, ","),
		"PAYLAB_ETCD_PORT="+strconv.Itoa(etcd), "PAYLAB_ETCD_PEER_PORT="+strconv.Itoa(etcdPeer))
	return c, nil
}

// start starts etcd and the members and waits for a leader with replicas.
func (c *haCluster) start() error { return c.script("up") }

// remove stops the cluster and deletes its data.
func (c *haCluster) remove() error {
	return errors.Join(c.script("down"), os.RemoveAll(c.dir))
}

// url is the superuser URL of database listing every member with
// target_session_attrs=read-write: pgx connects to whichever leads.
func (c *haCluster) url(database string) string {
	hosts := make([]string, len(c.ports))
	for i, p := range c.ports {
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", p)
	}
	return fmt.Sprintf("postgres://postgres:postgres@%s/%s?sslmode=disable&target_session_attrs=read-write&connect_timeout=3",
		strings.Join(hosts, ","), database)
}

// memberURL is the superuser URL of database on member m alone.
func (c *haCluster) memberURL(m int, database string) string {
	return fmt.Sprintf("postgres://postgres:postgres@127.0.0.1:%d/%s?sslmode=disable&connect_timeout=3", c.ports[m-1], database)
}

// haMember is one member's state as its Patroni REST API reports it.
type haMember struct {
	State       string `json:"state"`
	Role        string `json:"role"`
	SyncStandby bool   `json:"sync_standby"`
}

func (c *haCluster) member(ctx context.Context, m int) (haMember, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/patroni", c.apiPorts[m-1]), nil)
	if err != nil {
		return haMember{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return haMember{}, err
	}
	defer resp.Body.Close()
	var out haMember
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// leader is the member that is the running primary, or 0.
func (c *haCluster) leader(ctx context.Context) int {
	for m := 1; m <= haMembers; m++ {
		s, err := c.member(ctx, m)
		if err == nil && s.State == "running" && (s.Role == "master" || s.Role == "primary") {
			return m
		}
	}
	return 0
}

// synchronousStandby is the running replica Patroni holds as the
// synchronous standby (the one it promotes in synchronous mode), or 0.
func (c *haCluster) synchronousStandby(ctx context.Context) int {
	for m := 1; m <= haMembers; m++ {
		s, err := c.member(ctx, m)
		if err == nil && s.State == "running" && s.Role == "replica" && s.SyncStandby {
			return m
		}
	}
	return 0
}

// killPostmaster SIGKILLs member m's postmaster (Patroni lives on) and
// waits until it is gone.
func (c *haCluster) killPostmaster(m int) error {
	pidFile := filepath.Join(c.dir, "pgha", fmt.Sprintf("pg%d", m), "data", "postmaster.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return fmt.Errorf("member %d's PostgreSQL is not running: %w", m, err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return fmt.Errorf("pid file %s: %w", pidFile, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing member %d's postmaster (pid %d): %w", m, pid, err)
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			return nil
		}
	}
	return fmt.Errorf("member %d's postmaster (pid %d) still running a minute after SIGKILL", m, pid)
}

// frozenReceiver is a replica whose walreceiver is stopped (SIGSTOP): it
// receives and flushes no more WAL, and the leader's commits of an
// asynchronous cluster are on the leader alone.
type frozenReceiver struct {
	member, pid int
	once        sync.Once
}

// freezeReplica stops replica m's walreceiver with SIGSTOP.
func (c *haCluster) freezeReplica(ctx context.Context, m int) (*frozenReceiver, error) {
	conn, err := pgx.Connect(ctx, c.memberURL(m, "postgres"))
	if err != nil {
		return nil, fmt.Errorf("connecting to member %d: %w", m, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	f := &frozenReceiver{member: m}
	if err := conn.QueryRow(ctx, "SELECT pid FROM pg_stat_wal_receiver WHERE status = 'streaming'").Scan(&f.pid); err != nil {
		return nil, fmt.Errorf("finding member %d's walreceiver: %w", m, err)
	}
	if err := syscall.Kill(f.pid, syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("stopping member %d's walreceiver (pid %d): %w", m, f.pid, err)
	}
	return f, nil
}

// kill ends the frozen walreceiver: a crash of its replica's PostgreSQL,
// which restarts from what it flushed, so what the frozen process held
// unread in its socket is gone.
func (f *frozenReceiver) kill() { f.once.Do(func() { _ = syscall.Kill(f.pid, syscall.SIGKILL) }) }

// thaw resumes the walreceiver, unless it was killed.
func (f *frozenReceiver) thaw() { f.once.Do(func() { _ = syscall.Kill(f.pid, syscall.SIGCONT) }) }

func (c *haCluster) script(verb string) error {
	root, err := localstack.RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(root, "scripts", "pgha.sh"), verb)
	cmd.Env = c.env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgha.sh %s: %w\n%s", verb, err, out)
	}
	return nil
}
