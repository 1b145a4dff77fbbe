package main

import (
	"testing"

	"github.com/paylab/paylab/internal/testkit/consumertest"
	"github.com/paylab/paylab/internal/testkit/testenv"
)

// startChild runs this test binary as a notifications process (see TestMain).
func startChild(t *testing.T, cfg config, crashAt string) *testenv.Child {
	t.Helper()
	return consumertest.StartChild(t, "notifications", cfg.Config, crashAt, "SMTP_ADDR="+cfg.SMTPAddr)
}
