package inbox

import (
	"context"
	"errors"
	"fmt"
	"io"
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
		name string
		err  error
		want bool
	}{
		{"serialization failure", &pgconn.PgError{Code: "40001"}, true},
		{"deadlock", &pgconn.PgError{Code: "40P01"}, true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"cannot connect now", &pgconn.PgError{Code: "57P03"}, true},
		{"read-only transaction", &pgconn.PgError{Code: "25006"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"connect error", &pgconn.ConnectError{}, true},
		{"connection lost", io.ErrUnexpectedEOF, true},
		{"check violation", &pgconn.PgError{Code: "23514"}, false},
		{"handler timeout", context.DeadlineExceeded, false},
		{"handler's own error", errors.New("no such account"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := transient(fmt.Errorf("posting: %w", tc.err)); got != tc.want {
				t.Fatalf("transient(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
