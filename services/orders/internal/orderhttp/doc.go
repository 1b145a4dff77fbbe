// Package orderhttp is the public HTTP API of the orders service: chi
// routes, strict request decoding, RFC 9457 problem responses, idempotency
// keys and trace context, on top of package orderapp.
package orderhttp
