package main

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/paylab/paylab/internal/platform/consumersvc"
	"github.com/paylab/paylab/internal/testkit/consumertest"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/pkg/outbox"
	"github.com/paylab/paylab/services/notifications/internal/receipt"
)

// TestMain runs the tests, or, in a crash test's child process, a real
// notifications service configured from the environment like the binary.
func TestMain(m *testing.M) {
	consumertest.Main(m, func(ctx context.Context, fault consumersvc.FaultFunc) error {
		cfg, err := loadConfig()
		if err != nil {
			return err
		}
		return serve(ctx, cfg, slog.New(slog.NewJSONHandler(os.Stderr, nil)), fault)
	})
}

type fixture struct {
	*consumertest.Fixture
	mailpit *testenv.Mailpit
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWithPartitions(t, 3)
}

func newFixtureWithPartitions(t *testing.T, partitions int32) *fixture {
	t.Helper()
	return &fixture{consumertest.NewFixture(t, "notifications", partitions), testenv.StartMailpit(t)}
}

func (f *fixture) config(inboxEnabled bool) config {
	return config{
		Config:   f.Config("notifications", inboxEnabled),
		SMTPAddr: f.mailpit.SMTPAddr, SMTPTimeout: 10 * time.Second, MailFrom: "receipts@paylab.local",
	}
}

// start runs the service in this process until the test ends.
func (f *fixture) start(cfg config) *consumersvc.Service {
	f.T.Helper()
	return f.startWithFault(cfg, nil)
}

// startWithFault is start with the fault points wired to fault.
func (f *fixture) startWithFault(cfg config, fault consumersvc.FaultFunc) *consumersvc.Service {
	f.T.Helper()
	a, err := open(context.Background(), cfg, slog.New(slog.DiscardHandler), fault)
	if err != nil {
		f.T.Fatal(err)
	}
	f.Run(a)
	return a
}

// mailsFor returns the messages Mailpit holds for an event's receipt.
func (f *fixture) mailsFor(e *outbox.Event) []testenv.MailpitMessage {
	f.T.Helper()
	var out []testenv.MailpitMessage
	for _, m := range f.mailpit.Messages(f.T) {
		if "<"+m.MessageID+">" == receipt.MessageID(e.ID) {
			out = append(out, m)
		}
	}
	return out
}

// captured is an OrderCaptured event; notifications does not care which merchant.
func captured(orderID, customer string, amount int64, currency string) *outbox.Event {
	return testenv.OrderCaptured(orderID, customer, "mer_1", amount, currency)
}
