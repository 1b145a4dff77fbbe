// Package order is the orders domain: orders and refunds, the rules that
// validate them, the errors the application reports, and the events an order
// emits. It knows nothing about HTTP or PostgreSQL.
package order
