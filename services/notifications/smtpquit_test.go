package main

import (
	"strings"
	"testing"
	"time"

	"github.com/paylab/paylab/internal/testkit/consumertest"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/services/notifications/internal/receipt"
	"github.com/paylab/paylab/services/notifications/internal/smtptest"
)

// An SMTP server that accepts the receipt and then drops the connection
// instead of answering QUIT has the receipt: the event is processed once,
// recorded once, and the customer gets one email — not one per retry. A
// server that refuses the message gets it retried, and nothing is recorded.
func TestReceiptSentOnceWhenQUITFails(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		b         smtptest.Behavior
		processed bool
	}{
		{name: "accepted, QUIT unanswered", b: smtptest.Behavior{Quit: smtptest.QuitDrop}, processed: true},
		{name: "accepted, QUIT answered 421", b: smtptest.Behavior{Quit: smtptest.QuitError}, processed: true},
		{name: "DATA refused", b: smtptest.Behavior{RejectData: true}, processed: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := smtptest.Start(t, tc.b)
			f := &fixture{Fixture: consumertest.NewFixture(t, "notifications", 1)}
			a := f.start(config{Config: f.Config("notifications", true),
				SMTPAddr: srv.Addr, SMTPTimeout: 10 * time.Second, MailFrom: "receipts@paylab.local"})
			e := captured("ord-quit", "cus_9", 4200, "EUR")
			f.Publish(e)
			// Settled either way: processed, or attempted more than once
			// (a retry: the attempt was taken as failed).
			testenv.Eventually(t, 2*time.Minute, "the receipt processed or retried", func() bool {
				c := a.Runner.Counts()
				return c.Processed == 1 || c.Failed >= 2
			})
			c := a.Runner.Counts()
			recorded := f.Count("SELECT count(*) FROM notifications WHERE event_id = $1", e.ID)
			if !tc.processed {
				if c.Processed != 0 || recorded != 0 || len(srv.Messages()) != 0 {
					t.Errorf("refused: processed %d, recorded %d, accepted %d; want none", c.Processed, recorded, len(srv.Messages()))
				}
				return
			}
			if c.Processed != 1 || c.Failed != 0 || recorded != 1 {
				t.Errorf("processed %d, failed %d, recorded %d; want 1, 0, 1", c.Processed, c.Failed, recorded)
			}
			msgs := srv.Messages()
			if len(msgs) != 1 || !strings.Contains(msgs[0], "Message-ID: "+receipt.MessageID(e.ID)) {
				t.Errorf("the SMTP server accepted %d messages, want the receipt once", len(msgs))
			}
		})
	}
}
