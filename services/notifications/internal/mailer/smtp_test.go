package mailer_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/paylab/paylab/services/notifications/internal/mailer"
	"github.com/paylab/paylab/services/notifications/internal/smtptest"
)

func mail() mailer.Mail {
	return mailer.Mail{
		From: "receipts@paylab.local", To: "cus_1@example.test", Subject: "Receipt",
		MessageID: "<evt-1@paylab.local>", Date: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Body: "Thank you.\n.a line that starts with a dot",
	}
}

// Once the server has accepted the message (250 to its end) it is sent: a
// QUIT that goes wrong afterwards — the connection dropped, an error reply —
// must not report a failure, or the receipt is sent again on the retry.
func TestSendIsDoneOnceTheServerAcceptedTheMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		quit smtptest.Quit
	}{
		{name: "QUIT answered 221", quit: smtptest.QuitOK},
		{name: "connection dropped instead of answering QUIT", quit: smtptest.QuitDrop},
		{name: "QUIT answered 421", quit: smtptest.QuitError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := smtptest.Start(t, smtptest.Behavior{Quit: tc.quit})
			s := &mailer.SMTP{Addr: srv.Addr, Timeout: 30 * time.Second}
			if err := s.Send(context.Background(), mail()); err != nil {
				t.Errorf("Send: %v, want nil: the server accepted the message", err)
			}
			msgs := srv.Messages()
			if len(msgs) != 1 {
				t.Fatalf("the server accepted %d messages, want 1", len(msgs))
			}
			if !strings.Contains(msgs[0], "Message-ID: <evt-1@paylab.local>\r\n") || !strings.Contains(msgs[0], "\r\n.a line that starts with a dot\r\n") {
				t.Errorf("the message as received:\n%s", msgs[0])
			}
			if srv.Quits() != 1 {
				t.Errorf("QUIT sent %d times, want 1", srv.Quits())
			}
		})
	}
}

// A message the server did not accept is an error, whatever happens to
// QUIT.
func TestSendFailsWhenTheServerRefusesTheMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		b    smtptest.Behavior
		want string
	}{
		{name: "DATA refused", b: smtptest.Behavior{RejectData: true}, want: "DATA: 554"},
		{name: "DATA refused, connection dropped at QUIT", b: smtptest.Behavior{RejectData: true, Quit: smtptest.QuitDrop}, want: "DATA: 554"},
		{name: "message refused after its end", b: smtptest.Behavior{RejectMessage: true}, want: "ending message: 550"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := smtptest.Start(t, tc.b)
			err := (&mailer.SMTP{Addr: srv.Addr, Timeout: 30 * time.Second}).Send(context.Background(), mail())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Send: %v, want an error with %q", err, tc.want)
			}
			if n := len(srv.Messages()); n != 0 {
				t.Errorf("the server accepted %d messages", n)
			}
		})
	}
}
