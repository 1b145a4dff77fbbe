// Package paymenttrace holds the end-to-end test that one payment is one
// trace: the orders API's request, the transaction that stores the event,
// the relay's publish, and the ledger's and notifications' processing of it,
// each a span in the same trace, with the right parents.
//
// The orders API and the relay run in the test process and record into
// memory; the ledger and notifications run as their real binaries, with
// OTEL_EXPORTER_OTLP_ENDPOINT pointing at a receiver of the test's own, so
// their tracing setup and service names are checked as well.
package paymenttrace
