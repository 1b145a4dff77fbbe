package orderapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paylab/paylab/services/orders/internal/order"
)

// TestTranslateConnectionErrorsUnavailable: what a failover throws at a
// request (no leader to connect to, the leader shutting down or crashing
// under a statement, a member demoted under the pool) is ErrUnavailable,
// the 503 the HTTP layer maps it to; a statement the database refused on its
// own (a serialization failure, a deadlock, a constraint) is not.
func TestTranslateConnectionErrorsUnavailable(t *testing.T) {
	connect, err := pgconn.Connect(context.Background(),
		"postgres://u@127.0.0.1:1,127.0.0.1:2/db?connect_timeout=1&target_session_attrs=read-write")
	if err == nil {
		connect.Close(context.Background())
		t.Fatal("connected to port 1")
	}
	for _, tc := range []struct {
		name        string
		err         error
		unavailable bool
	}{
		{"no member accepts a connection", err, true},
		{"a pgconn connect error", &pgconn.ConnectError{}, true},
		{"admin shutdown 57P01", &pgconn.PgError{Code: "57P01"}, true},
		{"crash shutdown 57P02", &pgconn.PgError{Code: "57P02"}, true},
		{"cannot connect now 57P03", &pgconn.PgError{Code: "57P03"}, true},
		{"read-only transaction 25006", &pgconn.PgError{Code: "25006"}, true},
		{"connection failure 08006", &pgconn.PgError{Code: "08006"}, true},
		{"too many connections 53300", &pgconn.PgError{Code: "53300"}, true},
		{"the server gone under a statement", fmt.Errorf("reading: %w", io.ErrUnexpectedEOF), true},
		{"a reset connection", &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}, true},
		{"serialization failure 40001", &pgconn.PgError{Code: "40001"}, false},
		{"deadlock 40P01", &pgconn.PgError{Code: "40P01"}, false},
		{"not null violation 23502", &pgconn.PgError{Code: "23502"}, false},
		{"a plain error", errors.New("boom"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := translate(fmt.Errorf("committing: %w", tc.err))
			if errors.Is(got, order.ErrUnavailable) != tc.unavailable {
				t.Fatalf("translate(%v) = %v; unavailable = %v, want %v", tc.err, got, !tc.unavailable, tc.unavailable)
			}
			if !errors.Is(got, tc.err) {
				t.Fatalf("translate(%v) = %v, which lost the cause", tc.err, got)
			}
		})
	}
}
