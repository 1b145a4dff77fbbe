package testenv

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Private is a PostgreSQL server or Kafka broker of a test's own, started by
// scripts/stack.sh on free loopback ports with its state in a temporary
// folder. Tests that stop and restart a server (Kafka down, PostgreSQL
// restarted) use one, so they never disturb tests running in parallel on the
// shared stack.
type Private struct {
	service string // "pg" or "kafka"
	env     []string
	port    int
}

// StartKafka starts a private single-node Kafka broker, stopped at cleanup.
// It takes a few seconds; use the shared broker unless the test stops Kafka.
func StartKafka(t testing.TB) *Private { return startPrivate(t, "kafka") }

// StartPostgres starts a private PostgreSQL server, stopped at cleanup.
func StartPostgres(t testing.TB) *Private { return startPrivate(t, "pg") }

func startPrivate(t testing.TB, service string) *Private {
	t.Helper()
	dir, err := os.MkdirTemp("", "paylab-"+service+"-")
	if err != nil {
		t.Fatal(err)
	}
	p := &Private{service: service, port: freePort(t)}
	p.env = append(os.Environ(), "PAYLAB_STACK_DIR="+dir, "KAFKA_BROKERS=", "PAYLAB_ADMIN_DATABASE_URL=",
		fmt.Sprintf("PAYLAB_PG_PORT=%d", p.port),
		fmt.Sprintf("PAYLAB_KAFKA_PORT=%d", p.port),
		fmt.Sprintf("PAYLAB_KAFKA_CONTROLLER_PORT=%d", freePort(t)))
	t.Cleanup(func() {
		p.stack(t, "down")
		_ = os.RemoveAll(dir)
	})
	p.Start(t)
	return p
}

// Start starts the server (again) and waits until it is ready.
func (p *Private) Start(t testing.TB) { t.Helper(); p.stack(t, "up") }

// Stop stops the server cleanly.
func (p *Private) Stop(t testing.TB) { t.Helper(); p.stack(t, "down") }

// Brokers is the private broker's bootstrap address.
func (p *Private) Brokers() []string { return []string{fmt.Sprintf("127.0.0.1:%d", p.port)} }

// AdminURL is the private PostgreSQL server's superuser URL.
func (p *Private) AdminURL() string {
	return fmt.Sprintf("postgres://postgres:postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}

func (p *Private) stack(t testing.TB, verb string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot(), "scripts", "stack.sh"), verb, p.service)
	cmd.Env = p.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testenv: stack.sh %s %s: %v\n%s", verb, p.service, err, out)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// repoRoot is the repository's root folder, found from this source file.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return strings.TrimSuffix(filepath.Dir(file), filepath.Join("internal", "testenv"))
}
