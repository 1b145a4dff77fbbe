// Package localstack starts private PostgreSQL servers and Kafka brokers with
// scripts/stack.sh, on free loopback ports and with their state in a
// temporary folder, so a test or a chaos run can stop and restart one without
// touching anybody else's.
package localstack

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Server is one private PostgreSQL server ("pg"), or a private Kafka of one
// broker or a cluster of several ("kafka").
type Server struct {
	service string
	dir     string
	env     []string
	ports   []int // one per Kafka node; PostgreSQL's port
}

// NewKafka prepares (does not start) a private Kafka broker.
func NewKafka() (*Server, error) { return newServer("kafka", 1) }

// NewKafkaCluster prepares (does not start) a private Kafka cluster of nodes
// brokers, each also a controller voter; with 3, topics get replication
// factor 3 and min.insync.replicas 2 (scripts/stack.sh, KAFKA_NODES). It
// speaks PLAINTEXT, without authentication, as the single node does.
func NewKafkaCluster(nodes int) (*Server, error) { return newServer("kafka", nodes) }

// NewSecureKafka prepares (does not start) a private Kafka of nodes brokers
// secured as scripts/stack.sh secures the cluster (KAFKA_SECURITY=sasl):
// TLS and SASL/SCRAM for clients, mutual TLS among the nodes, the standard
// authorizer. ClientEnv gives its credentials.
func NewSecureKafka(nodes int) (*Server, error) {
	s, err := newServer("kafka", nodes)
	if err != nil {
		return nil, err
	}
	var internal []string
	for range nodes {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		internal = append(internal, strconv.Itoa(port))
	}
	s.env = append(s.env, "KAFKA_SECURITY=sasl", "PAYLAB_KAFKA_INTERNAL_PORTS="+strings.Join(internal, ","))
	return s, nil
}

// ClientEnv is what `scripts/stack.sh env` exports for the server, as
// KEY=value: the addresses and, for a secure Kafka, the admin's
// credentials (KAFKA_SECURITY_PROTOCOL, KAFKA_CA_FILE, KAFKA_SASL_USERNAME,
// KAFKA_SASL_PASSWORD) and each service principal's password.
func (s *Server) ClientEnv() ([]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(root, "scripts", "stack.sh"), "env")
	cmd.Env = s.env
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("stack.sh env: %w", err)
	}
	var env []string
	for _, line := range strings.Split(string(out), "\n") {
		kv, ok := strings.CutPrefix(line, "export ")
		if !ok {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, k+"="+strings.Trim(v, "'"))
	}
	return env, nil
}

// NewPostgres prepares (does not start) a private PostgreSQL server.
func NewPostgres() (*Server, error) { return newServer("pg", 1) }

func newServer(service string, nodes int) (*Server, error) {
	dir, err := os.MkdirTemp("", "paylab-"+service+"-")
	if err != nil {
		return nil, err
	}
	s := &Server{service: service, dir: dir}
	free, err := FreePorts(2 * nodes) // a listener and a controller per node
	if err != nil {
		return nil, err
	}
	var ports, controllers []string
	for i := range nodes {
		port, controller := free[2*i], free[2*i+1]
		s.ports = append(s.ports, port)
		ports, controllers = append(ports, strconv.Itoa(port)), append(controllers, strconv.Itoa(controller))
	}
	s.env = append(os.Environ(), "PAYLAB_STACK_DIR="+dir, "KAFKA_BROKERS=", "PAYLAB_ADMIN_DATABASE_URL=",
		fmt.Sprintf("KAFKA_NODES=%d", nodes),
		"PAYLAB_PG_PORT="+ports[0],
		"PAYLAB_KAFKA_PORT="+ports[0], "PAYLAB_KAFKA_CONTROLLER_PORT="+controllers[0],
		"PAYLAB_KAFKA_PORTS="+strings.Join(ports, ","),
		"PAYLAB_KAFKA_CONTROLLER_PORTS="+strings.Join(controllers, ","),
		"KAFKA_SECURITY=plaintext")
	return s, nil
}

// Start starts the server (again) and waits until it is ready; on a Kafka
// cluster, it starts the nodes that are not running.
func (s *Server) Start() error { return s.stack("up") }

// Stop stops the server cleanly; its data stays for the next Start.
func (s *Server) Stop() error { return s.stack("down") }

// Remove stops the server and deletes its data.
func (s *Server) Remove() error {
	err := s.Stop()
	if rmErr := os.RemoveAll(s.dir); err == nil {
		err = rmErr
	}
	return err
}

// Brokers is a private Kafka's bootstrap addresses, node 1 first.
func (s *Server) Brokers() []string {
	out := make([]string, len(s.ports))
	for i, p := range s.ports {
		out[i] = fmt.Sprintf("127.0.0.1:%d", p)
	}
	return out
}

// Nodes is how many brokers a private Kafka has; their node ids are 1..Nodes.
func (s *Server) Nodes() int { return len(s.ports) }

// AdminURL is a private PostgreSQL server's superuser URL.
func (s *Server) AdminURL() string {
	return fmt.Sprintf("postgres://postgres:postgres@127.0.0.1:%d/postgres?sslmode=disable", s.ports[0])
}

// KillNode SIGKILLs Kafka node id (1..Nodes), a crash, and waits until the
// process is gone. Start brings it back.
func (s *Server) KillNode(id int) error {
	if s.service != "kafka" || id < 1 || id > len(s.ports) {
		return fmt.Errorf("no Kafka node %d here", id)
	}
	pidFile := filepath.Join(s.dir, "kafka", "kafka.pid")
	if len(s.ports) > 1 {
		pidFile = filepath.Join(s.dir, "kafka", "cluster", fmt.Sprintf("node-%d", id), "kafka.pid")
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return fmt.Errorf("kafka node %d is not running: %w", id, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("pid file %s: %w", pidFile, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing Kafka node %d (pid %d): %w", id, pid, err)
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			return nil
		}
	}
	return fmt.Errorf("kafka node %d (pid %d) still running a minute after SIGKILL", id, pid)
}

func (s *Server) stack(verb string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(root, "scripts", "stack.sh"), verb, s.service)
	cmd.Env = s.env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("stack.sh %s %s: %w\n%s", verb, s.service, err, out)
	}
	return nil
}

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on now. It
// is drawn below Linux's ephemeral range (32768 and up), so an outgoing
// connection cannot take it before the server it is meant for binds it.
func FreePort() (int, error) {
	for range 100 {
		port := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		return port, nil
	}
	return 0, errors.New("no free TCP port between 20000 and 32000")
}

// FreePorts returns n different ports, each as FreePort returns one.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for len(ports) < n {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		if !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	return ports, nil
}

// RepoEnv names the variable that points at a paylab checkout, for a binary
// run from outside one.
const RepoEnv = "PAYLAB_REPO"

// RepoRoot is the paylab checkout whose scripts/stack.sh starts the private
// servers: $PAYLAB_REPO when set, else the nearest folder at or above the
// working directory that holds scripts/stack.sh. A binary does not know where
// it was built; a copy of it run elsewhere needs one of the two.
func RepoRoot() (string, error) {
	if dir := os.Getenv(RepoEnv); dir != "" {
		if !isRepo(dir) {
			return "", fmt.Errorf("%s=%s: no scripts/stack.sh there", RepoEnv, dir)
		}
		return filepath.Abs(dir)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if isRepo(dir) {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no paylab checkout (scripts/stack.sh) at or above %s: run from inside one or set %s", wd, RepoEnv)
		}
	}
}

func isRepo(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, "scripts", "stack.sh"))
	return err == nil && !st.IsDir()
}
