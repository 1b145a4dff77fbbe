package testenv

import (
	"net"
	"testing"
)

// Listen listens on a free loopback port.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// ClosedAddr is a loopback host:port nothing listens on: a port the kernel
// handed out and that was closed again, for a dependency that must be down
// or an address a child process binds to next.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	ln := Listen(t)
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
