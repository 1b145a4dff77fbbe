package inbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestTransientDatabaseGone: a handler that fails because the database
// failed over under it (no member to connect to, the leader shut down or
// crashed, a member demoted to read-only) is retried without using up its
// attempts; a handler's own failure, its timeout included, is not.
func TestTransientDatabaseGone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		err      error
		connLost bool // the handler's transaction lost its connection
		want     bool
	}{
		{"serialization failure", &pgconn.PgError{Code: "40001"}, false, true},
		{"deadlock", &pgconn.PgError{Code: "40P01"}, false, true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, false, true},
		{"cannot connect now", &pgconn.PgError{Code: "57P03"}, false, true},
		{"read-only transaction", &pgconn.PgError{Code: "25006"}, false, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, false, true},
		{"connect error", &pgconn.ConnectError{}, false, true},
		{"connection lost", io.ErrUnexpectedEOF, true, true},
		{"network error, connection lost", &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}, true, true},
		{"SMTP server unreachable, connection alive", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, false, false},
		{"EOF from another server, connection alive", io.ErrUnexpectedEOF, false, false},
		{"check violation", &pgconn.PgError{Code: "23514"}, false, false},
		{"handler timeout", context.DeadlineExceeded, false, false},
		{"handler's own error", errors.New("no such account"), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := transient(fmt.Errorf("posting: %w", tc.err), tc.connLost); got != tc.want {
				t.Fatalf("transient(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
