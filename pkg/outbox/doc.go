// Package outbox implements the transactional outbox: the sending half of
// effectively-once event delivery.
//
// A service that decides something (capture this payment) must both change
// its database and tell other services. Two systems, no shared transaction: a
// crash between the two writes loses the event, or announces a decision that
// rolled back. The outbox closes that hole by writing the event into a table
// of the same database, in the same transaction as the business change
// (Enqueue). A relay then publishes committed rows to Kafka and marks them
// dispatched. Publishing is at-least-once: a relay that crashes after
// publishing and before marking publishes again; consumers deduplicate with
// an inbox (package inbox) keyed by the event id.
//
// The table is created by the migration db/migrations/orders/00002_outbox.sql;
// copy it with the package.
package outbox
