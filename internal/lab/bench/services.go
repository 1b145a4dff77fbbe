package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/paylab/paylab/internal/lab/localstack"
	"github.com/paylab/paylab/internal/lab/supervise"
)

// service is a paylab binary the run started as a child process, exactly as
// it is deployed: configured by environment variables, ready when its admin
// listener's /readyz answers.
type service struct {
	*supervise.Process
	URL     string // public listener, when it has one
	LogPath string
}

// start launches binary (orders or ledger) with env and waits until it is
// ready.
func (e *env) start(ctx context.Context, name, binary string, args []string, env ...string) (*service, error) {
	ports, err := localstack.FreePorts(2)
	if err != nil {
		return nil, err
	}
	adminPort, httpPort := ports[0], ports[1]
	log, err := e.logFile(name)
	if err != nil {
		return nil, err
	}
	s := &service{URL: fmt.Sprintf("http://127.0.0.1:%d", httpPort), LogPath: log.Name()}
	s.Process = &supervise.Process{
		Name: name, Path: filepath.Join(e.cfg.Bin, binary), Args: args, Log: log,
		Env: append(env, "LOG_LEVEL=warn", "KAFKA_BROKERS="+strings.Join(e.cfg.Brokers, ","),
			fmt.Sprintf("ADMIN_ADDR=127.0.0.1:%d", adminPort), fmt.Sprintf("HTTP_ADDR=127.0.0.1:%d", httpPort)),
		ReadyURL: fmt.Sprintf("http://127.0.0.1:%d/readyz", adminPort),
	}
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := s.Start(sctx); err != nil {
		s.stop()
		return nil, fmt.Errorf("%s (log: %s): %w", name, s.LogPath, err)
	}
	return s, nil
}

// orders starts the orders API on the database at dbURL, writing events for
// topic, with a pool of maxConns connections (0: the service's default).
func (e *env) orders(ctx context.Context, name, dbURL, topic string, maxConns int) (*service, error) {
	env := []string{"DATABASE_URL=" + dbURL, "ORDERS_TOPIC=" + topic, "OUTBOX_MODE=outbox"}
	if maxConns > 0 {
		env = append(env, fmt.Sprintf("DATABASE_MAX_CONNS=%d", maxConns))
	}
	return e.start(ctx, name, "orders", []string{"serve"}, env...)
}

// ledger starts the ledger consuming topic into the database at dbURL, with
// the inbox on and the rest of its configuration at the defaults. It is
// ready once it has joined its consumer group.
func (e *env) ledger(ctx context.Context, name, dbURL, topic string, env ...string) (*service, error) {
	return e.start(ctx, name, "ledger", nil, append([]string{"DATABASE_URL=" + dbURL, "ORDERS_TOPIC=" + topic,
		"DEAD_LETTER_TOPIC=" + topic + ".dlq", "CONSUMER_GROUP=" + e.group(name), "INBOX_ENABLED=true"}, env...)...)
}

func (s *service) stop() { s.Stop(20 * time.Second) }
