// Package pgha runs a private highly available PostgreSQL for chaos runs and
// tests: the Patroni cluster of scripts/pgha.sh (three PostgreSQL 15
// members and etcd on 127.0.0.1), on free ports and with its state in a
// temporary folder, so a test can kill its leader without touching the local
// stack's servers.
package pgha

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
	"syscall"
	"time"

	"github.com/paylab/paylab/internal/lab/localstack"
)

// Members is the size of the cluster.
const Members = 3

// Replication is the cluster's replication mode, scripts/pgha.sh's PG_SYNC.
type Replication string

const (
	Synchronous  Replication = "on"     // synchronous_mode: no acknowledged commit lost by a failover
	Strict       Replication = "strict" // synchronous_mode_strict too: no writes without a standby
	Asynchronous Replication = "off"    // a failover may lose what the replicas had not received
)

// Cluster is a private Patroni cluster. Members are numbered 1..Members.
type Cluster struct {
	dir      string
	env      []string
	ports    []int
	apiPorts []int
}

// New prepares (does not start) a private cluster replicating as r.
func New(r Replication) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "paylab-pgha-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir}
	free, err := localstack.FreePorts(2*Members + 2) // PostgreSQL and Patroni's API per member, etcd's two
	if err != nil {
		return nil, err
	}
	var ports, apiPorts []string
	for m := range Members {
		pg, api := free[2*m], free[2*m+1]
		c.ports, c.apiPorts = append(c.ports, pg), append(c.apiPorts, api)
		ports, apiPorts = append(ports, strconv.Itoa(pg)), append(apiPorts, strconv.Itoa(api))
	}
	etcd, etcdPeer := free[2*Members], free[2*Members+1]
	c.env = append(os.Environ(), "PAYLAB_STACK_DIR="+dir, "PG_SYNC="+string(r),
		"PAYLAB_PG_HA_PORTS="+strings.Join(ports, ","), "PAYLAB_PG_HA_API_PORTS="+strings.Join(apiPorts, ","),
		"PAYLAB_ETCD_PORT="+strconv.Itoa(etcd), "PAYLAB_ETCD_PEER_PORT="+strconv.Itoa(etcdPeer))
	return c, nil
}

// Start starts etcd and the members that are not running and waits until a
// leader takes writes with two streaming replicas (one of them synchronous
// unless the replication is asynchronous).
func (c *Cluster) Start() error { _, err := c.script("up"); return err }

// Stop stops the members and etcd; the data stays for the next Start.
func (c *Cluster) Stop() error { _, err := c.script("down"); return err }

// Remove stops the cluster and deletes its data.
func (c *Cluster) Remove() error {
	err := c.Stop()
	return errors.Join(err, os.RemoveAll(c.dir))
}

// Dir is the cluster's state folder: pgha/etcd and pgha/pgN, each with its
// patroni.yml, patroni.log and data (PostgreSQL's log in data/log).
func (c *Cluster) Dir() string { return c.dir }

// Status is scripts/pgha.sh status: the members, their roles and lag.
func (c *Cluster) Status() string { out, _ := c.script("status"); return out }

// URL is the superuser URL listing every member with
// target_session_attrs=read-write: pgx connects to whichever is the leader.
func (c *Cluster) URL(database string) string {
	hosts := make([]string, len(c.ports))
	for i, p := range c.ports {
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", p)
	}
	return fmt.Sprintf("postgres://postgres:postgres@%s/%s?sslmode=disable&target_session_attrs=read-write&connect_timeout=3",
		strings.Join(hosts, ","), database)
}

// MemberURL is the superuser URL of member m alone, leader or replica.
func (c *Cluster) MemberURL(m int, database string) string {
	return fmt.Sprintf("postgres://postgres:postgres@127.0.0.1:%d/%s?sslmode=disable&connect_timeout=3", c.Port(m), database)
}

// Port is member m's PostgreSQL port.
func (c *Cluster) Port(m int) int { return c.ports[m-1] }

// Member is one member's state as its Patroni REST API reports it.
type Member struct {
	State string `json:"state"` // running, stopped, starting, ...
	Role  string `json:"role"`  // master (primary) or replica
	// SyncStandby: the replica Patroni would promote in synchronous mode.
	SyncStandby bool `json:"sync_standby"`
}

// Member asks member m's Patroni about itself.
func (c *Cluster) Member(ctx context.Context, m int) (Member, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/patroni", c.apiPorts[m-1]), nil)
	if err != nil {
		return Member{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Member{}, fmt.Errorf("asking member %d: %w", m, err)
	}
	defer resp.Body.Close()
	var out Member
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return Member{}, fmt.Errorf("decoding member %d's state: %w", m, err)
	}
	return out, nil
}

// Leader is the member that is the running primary, or 0 when none is.
func (c *Cluster) Leader(ctx context.Context) int {
	for m := 1; m <= Members; m++ {
		s, err := c.Member(ctx, m)
		if err == nil && s.State == "running" && (s.Role == "master" || s.Role == "primary") {
			return m
		}
	}
	return 0
}

// SynchronousStandby is the running replica that Patroni holds as the
// synchronous standby, the only one it promotes in synchronous mode, or 0.
func (c *Cluster) SynchronousStandby(ctx context.Context) int {
	for m := 1; m <= Members; m++ {
		s, err := c.Member(ctx, m)
		if err == nil && s.State == "running" && s.Role == "replica" && s.SyncStandby {
			return m
		}
	}
	return 0
}

// KillPostmaster SIGKILLs member m's postmaster, a crash of its PostgreSQL
// (Patroni lives on and reports it), and waits until the process is gone.
func (c *Cluster) KillPostmaster(m int) error {
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

// Switchover asks Patroni for a planned switchover from member leader to
// member candidate (patronictl switchover): the leader stops once the
// candidate has every commit, and the candidate is promoted.
func (c *Cluster) Switchover(ctx context.Context, leader, candidate int) error {
	cfg := filepath.Join(c.dir, "pgha", fmt.Sprintf("pg%d", leader), "patroni.yml")
	cmd := exec.CommandContext(ctx, "patronictl", "-c", cfg, "switchover",
		"--leader", fmt.Sprintf("pg%d", leader), "--candidate", fmt.Sprintf("pg%d", candidate), "--force")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("patronictl switchover: %w\n%s", err, out)
	}
	return nil
}

func (c *Cluster) script(verb string) (string, error) {
	root, err := localstack.RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(filepath.Join(root, "scripts", "pgha.sh"), verb)
	cmd.Env = c.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("pgha.sh %s: %w\n%s", verb, err, out)
	}
	return string(out), nil
}
