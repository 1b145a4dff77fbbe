package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paylab/paylab/internal/testkit/testenv"
)

func TestTransientTellsAnUnreachableServerFromARefusal(t *testing.T) {
	t.Parallel()
	// The failure compose showed: one DNS query of the embedded resolver
	// timed out under load.
	dnsTimeout := fmt.Errorf("reading orders: failed to connect to `user=orders database=orders`: hostname resolving error: %w",
		&net.DNSError{Err: "dial udp 127.0.0.11:53: i/o timeout", Name: "postgres", Server: "127.0.0.11:53", IsTimeout: true})
	for _, tc := range []struct {
		name      string
		err       error
		transient bool
	}{
		{"DNS timeout", dnsTimeout, true},
		{"name not found while its container restarts", &net.DNSError{Err: "no such host", Name: "postgres", IsNotFound: true}, true},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, true},
		{"connection reset", fmt.Errorf("reading the ledger: %w", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), true},
		{"bare ECONNRESET", syscall.ECONNRESET, true},
		{"i/o timeout", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, true},
		{"one attempt's deadline", fmt.Errorf("reading notifications: %w", context.DeadlineExceeded), true},
		{"server closed the connection", fmt.Errorf("reading orders: failed to receive message: %w", io.ErrUnexpectedEOF), true},
		{"database starting up", &pgconn.PgError{Code: "57P03", Message: "the database system is starting up"}, true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"Kafka leader not available", fmt.Errorf("partitions of order-events: %w", sarama.ErrLeaderNotAvailable), true},
		{"Kafka out of brokers", fmt.Errorf("connecting to Kafka: %w", sarama.ErrOutOfBrokers), true},
		{"password authentication failed", &pgconn.PgError{Code: "28P01"}, false},
		{"database does not exist", &pgconn.PgError{Code: "3D000"}, false},
		{"relation does not exist", fmt.Errorf("reading orders: %w", &pgconn.PgError{Code: "42P01"}), false},
		{"Kafka client misconfigured", sarama.ConfigurationError("Net.DialTimeout must be > 0"), false},
		{"canceled by the caller", fmt.Errorf("reading orders: %w", context.Canceled), false},
		{"anything else", errors.New("unexpected payload"), false},
		{"no error", nil, false},
	} {
		if got := transient(tc.err); got != tc.transient {
			t.Errorf("%s: transient(%v) = %t, want %t", tc.name, tc.err, got, tc.transient)
		}
	}
}

// withDatabase returns dbURL naming database name on host instead.
func withDatabase(t *testing.T, dbURL, host, name string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		u.Host = host
	}
	if name != "" {
		u.Path = "/" + name
	}
	return u.String()
}

func TestSettleRetriesAnUnreachableDatabaseUntilItsDeadline(t *testing.T) {
	t.Parallel()
	src := Sources{OrdersURL: withDatabase(t, testenv.AdminURL(), testenv.ClosedAddr(t), "orders")}
	src.LedgerURL, src.NotificationsURL = src.OrdersURL, src.OrdersURL
	_, err := Settle(testenv.Context(t), src, 3*time.Second, 0)
	var failed *retriesError
	if !errors.As(err, &failed) || failed.failures < 2 {
		t.Fatalf("Settle against a closed port = %v; want it to retry until its deadline", err)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) || !strings.Contains(err.Error(), "not settled within 3s") {
		t.Fatalf("Settle's error %q does not name the deadline and the refused connection", err)
	}
}

func TestSettleFailsAtOnceOnARefusal(t *testing.T) {
	t.Parallel()
	ledgerDB := testenv.NewDatabase(t, "ledger")
	for _, tc := range []struct {
		name, ordersURL, code string
	}{
		{"database does not exist", withDatabase(t, testenv.AdminURL(), "", "paylab_no_such_database"), "3D000"},
		{"SQL error: the ledger's database has no orders table", ledgerDB, "42P01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := Sources{OrdersURL: tc.ordersURL, LedgerURL: ledgerDB, NotificationsURL: ledgerDB}
			// Were the refusal retried, Settle would return at its deadline
			// with a *retriesError.
			_, err := Settle(testenv.Context(t), src, time.Minute, 0)
			var (
				pgErr  *pgconn.PgError
				failed *retriesError
			)
			if !errors.As(err, &pgErr) || pgErr.Code != tc.code || errors.As(err, &failed) {
				t.Fatalf("Settle = %v; want SQLSTATE %s at once", err, tc.code)
			}
		})
	}
}

// lateContext has a deadline already past while it is not yet done: the
// moment between a dial's i/o timeout at the deadline and the context's own
// timer.
type lateContext struct {
	context.Context
	deadline time.Time
}

func (c lateContext) Deadline() (time.Time, bool) { return c.deadline, true }

// An attempt that fails at the deadline failed because of it: retry reports
// the context's end, not a failure of the server (Settle then reports the
// last read instead of an error).
func TestRetryCountsNoFailureAtTheDeadline(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	ctx := lateContext{Context: parent, deadline: time.Now().Add(-time.Millisecond)}
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	attempts := 0
	err := retry(ctx, 0, func(context.Context) error {
		attempts++
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	})
	var failed *retriesError
	if errors.As(err, &failed) || !errors.Is(err, context.Canceled) || attempts != 1 {
		t.Errorf("retry = %v after %d attempts; want the context's end after one", err, attempts)
	}
}
