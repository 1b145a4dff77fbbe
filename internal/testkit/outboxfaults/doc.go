// Package outboxfaults holds the tests of package outbox (pkg/outbox) that
// need a server of their own to break: Kafka stopped and started again, a
// PostgreSQL whose settings a test changes. They start paylab's private
// servers (testenv.StartKafka, testenv.StartPostgres), which the outbox
// module's own tests cannot reach; everything else about the package is
// tested in its module, on the shared local stack.
package outboxfaults
