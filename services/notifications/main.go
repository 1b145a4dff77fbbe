// Command notifications consumes order events and sends a receipt email per
// captured or refunded order over SMTP.
//
//	notifications                    consume (same as "notifications serve")
//	notifications redrive <event-id> re-process an event the inbox marked failed
//
// Configuration comes from environment variables (see config.go and
// internal/platform/consumersvc). Traces are exported over OTLP/HTTP when
// OTEL_EXPORTER_OTLP_ENDPOINT is set.
package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/paylab/paylab/internal/platform/admin"
	"github.com/paylab/paylab/internal/platform/chaos"
	"github.com/paylab/paylab/internal/platform/consumersvc"
	"github.com/paylab/paylab/internal/platform/process"
	"github.com/paylab/paylab/pkg/inbox"
	"github.com/paylab/paylab/services/notifications/internal/mailer"
	"github.com/paylab/paylab/services/notifications/internal/receipt"
)

// FaultAfterMarkBeforeOffsetCommit is the step boundary after the receipt's
// record and the inbox mark committed, before the Kafka offset is marked. A
// crash here makes Kafka re-deliver the event; an error leaves the offset
// unmarked and the event is delivered again after the retry backoff, a
// failed attempt like a handler error. Either way the inbox skips it (no
// second email); with the inbox off the receipt is sent again.
const FaultAfterMarkBeforeOffsetCommit = "notifications.after_mark_before_offset_commit"

func main() { process.Main("notifications", "", run) }

func run(ctx context.Context, args []string) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	log, stop, err := consumersvc.Setup(ctx, "notifications", cfg.LogLevel)
	if err != nil {
		return err
	}
	defer stop()
	switch {
	case len(args) == 0 || args[0] == "serve":
		return serve(ctx, cfg, log, chaos.Points(FaultAfterMarkBeforeOffsetCommit, receipt.FaultAfterSendBeforeMark))
	case args[0] == "redrive" && len(args) == 2:
		return redrive(ctx, cfg, log, args[1])
	}
	return errors.New("usage: notifications [serve] | notifications redrive <event-id>")
}

// redrive re-processes one event the inbox marked failed (an operator
// command): the receipt is sent now.
func redrive(ctx context.Context, cfg config, log *slog.Logger, eventID string) error {
	return consumersvc.Redrive(ctx, cfg.DatabaseURL, log, notifier(cfg, nil).Handlers(), eventID)
}

func notifier(cfg config, fault consumersvc.FaultFunc) *receipt.Notifier {
	return &receipt.Notifier{
		Sender: &mailer.SMTP{Addr: cfg.SMTPAddr, Timeout: cfg.SMTPTimeout},
		From:   cfg.MailFrom,
		Fault:  fault,
	}
}

// open builds the notifications consumer: the receipt handlers behind the
// inbox, and a readiness check on the SMTP server.
func open(ctx context.Context, cfg config, log *slog.Logger, fault consumersvc.FaultFunc) (*consumersvc.Service, error) {
	return consumersvc.Open(ctx, cfg.Config, log, consumersvc.Spec{
		Name: "notifications",
		Inbox: inbox.Config{
			Handlers: notifier(cfg, fault).Handlers(),
			// One message per transaction: a receipt leaves by SMTP before its
			// transaction commits, so a failed batch retried message by message
			// would send the batch's earlier receipts again.
			BatchSize: 1,
			// An unreachable SMTP server is retried for about half a minute
			// before the receipt is dead-lettered.
			RetryMaxBackoff: 10 * time.Second,
			HandlerTimeout:  cfg.SMTPTimeout + 5*time.Second,
		},
		Fault:            fault,
		AfterCommitPoint: FaultAfterMarkBeforeOffsetCommit,
		Checks: map[string]admin.Check{
			"smtp": func(ctx context.Context) error {
				c, err := (&net.Dialer{}).DialContext(ctx, "tcp", cfg.SMTPAddr)
				if err != nil {
					return err
				}
				return c.Close()
			},
		},
	})
}

// serve consumes and serves the admin listener until ctx ends.
func serve(ctx context.Context, cfg config, log *slog.Logger, fault consumersvc.FaultFunc) error {
	s, err := open(ctx, cfg, log, fault)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Serve(ctx)
}
