package testenv

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// rolesLock names the advisory lock that serialises ALTER ROLE across test
// binaries running in parallel: PostgreSQL refuses two concurrent ALTER
// ROLE of one role ("tuple concurrently updated").
const rolesLock = "testenv roles"

// WithRolesLocked runs fn while it holds the lock every test takes to alter
// the stack's roles.
func WithRolesLocked(ctx context.Context, admin *pgx.Conn, fn func() error) error {
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", rolesLock); err != nil {
		return err
	}
	defer admin.Exec(context.Background(), "SELECT pg_advisory_unlock(hashtext($1))", rolesLock) //nolint:errcheck
	return fn()
}

// GrantReplication gives role REPLICATION, as a WAL relay's role needs.
func GrantReplication(t testing.TB, ctx context.Context, role string) {
	t.Helper()
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if err := WithRolesLocked(ctx, admin, func() error {
		_, err := admin.Exec(ctx, "ALTER ROLE "+pgx.Identifier{role}.Sanitize()+" REPLICATION")
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
