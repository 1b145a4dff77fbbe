package main

import (
	"net"
	"strconv"
	"testing"

	"github.com/paylab/paylab/internal/testenv"
)

// startChild runs this test binary as a notifications process (see TestMain).
func startChild(t *testing.T, cfg config, crashAt string) *testenv.Child {
	t.Helper()
	return testenv.StartChild(t, "notifications",
		childEnv+"=1", crashAtEnv+"="+crashAt,
		"DATABASE_URL="+cfg.DatabaseURL, "KAFKA_BROKERS="+cfg.KafkaBrokers,
		"ORDERS_TOPIC="+cfg.OrdersTopic, "DEAD_LETTER_TOPIC="+cfg.DeadLetterTopic,
		"CONSUMER_GROUP="+cfg.ConsumerGroup, "SMTP_ADDR="+cfg.SMTPAddr,
		"INBOX_ENABLED="+strconv.FormatBool(cfg.InboxEnabled))
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

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}
