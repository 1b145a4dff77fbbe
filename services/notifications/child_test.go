package main

import (
	"net"
	"testing"

	"github.com/paylab/paylab/internal/testkit/consumertest"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// startChild runs this test binary as a notifications process (see TestMain).
func startChild(t *testing.T, cfg config, crashAt string) *testenv.Child {
	t.Helper()
	return consumertest.StartChild(t, "notifications", cfg.Config, crashAt, "SMTP_ADDR="+cfg.SMTPAddr)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
