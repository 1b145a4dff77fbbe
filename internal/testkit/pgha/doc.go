// Package pgha holds the tests that need a highly available PostgreSQL (a
// private Patroni cluster of internal/lab/pgha): a synchronous commit
// surviving its leader's SIGKILL and an asynchronous one lost, the orders API
// through a failover, and the WAL relay's standby guard. They run with
// PAYLAB_PG_HA=1 (make test-ha).
package pgha
