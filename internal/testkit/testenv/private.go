package testenv

import (
	"testing"

	"github.com/paylab/paylab/internal/lab/localstack"
)

// Private is a PostgreSQL server or Kafka broker of a test's own (see package
// localstack). Tests that stop and restart a server (Kafka down, PostgreSQL
// restarted) use one, so they never disturb tests running in parallel on the
// shared stack.
type Private struct{ *localstack.Server }

// StartKafka starts a private single-node Kafka broker, removed at cleanup.
// It takes a few seconds; use the shared broker unless the test stops Kafka.
func StartKafka(t testing.TB) *Private {
	t.Helper()
	return startPrivate(t, localstack.NewKafka)
}

// StartPostgres starts a private PostgreSQL server, removed at cleanup.
func StartPostgres(t testing.TB) *Private {
	t.Helper()
	return startPrivate(t, localstack.NewPostgres)
}

func startPrivate(t testing.TB, newServer func() (*localstack.Server, error)) *Private {
	t.Helper()
	s, err := newServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Remove(); err != nil {
			t.Errorf("testenv: %v", err)
		}
	})
	p := &Private{s}
	p.Start(t)
	return p
}

// Start starts the server (again) and waits until it is ready.
func (p *Private) Start(t testing.TB) {
	t.Helper()
	if err := p.Server.Start(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// Stop stops the server cleanly.
func (p *Private) Stop(t testing.TB) {
	t.Helper()
	if err := p.Server.Stop(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	port, err := localstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}
