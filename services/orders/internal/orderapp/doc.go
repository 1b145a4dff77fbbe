// Package orderapp is the orders application layer: it places, captures and
// refunds orders in PostgreSQL transactions, records their events in the
// outbox of the same transaction (or, in the naive modes that exist only to
// demonstrate the dual-write hole, publishes them straight to Kafka), and
// stores idempotency keys with the effects they belong to.
//
// It does not know HTTP: the caller hands it an Idempotency with an Encode
// function that renders the response to store, and gets the stored response
// back on a replay.
package orderapp
