package main

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/paylab/paylab/internal/platform/consumersvc"
	"github.com/paylab/paylab/internal/testkit/consumertest"
	"github.com/paylab/paylab/internal/testkit/testenv"
	"github.com/paylab/paylab/services/notifications/internal/receipt"
)

func TestSameEventPublishedFiveTimes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		inboxEnabled bool
		wantMails    int
		wantDups     int
	}{
		{name: "inbox on: one email", inboxEnabled: true, wantMails: 1, wantDups: 4},
		{name: "inbox off: five emails", inboxEnabled: false, wantMails: 5, wantDups: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			a := f.start(f.config(tc.inboxEnabled))
			e := captured("ord-dup", "cus_1", 1999, "EUR")
			for range 5 {
				f.Publish(e)
			}
			testenv.Eventually(t, 60*time.Second, "five deliveries", func() bool {
				c := a.Runner.Counts()
				return c.Processed+c.Duplicates == 5
			})
			mails := f.mailsFor(e)
			if len(mails) != tc.wantMails {
				t.Errorf("emails = %d, want %d", len(mails), tc.wantMails)
			}
			if got := f.Count("SELECT count(*) FROM notifications WHERE event_id = $1", e.ID); got != tc.wantMails {
				t.Errorf("notifications rows = %d, want %d", got, tc.wantMails)
			}
			if got := a.Runner.Counts().Duplicates; got != tc.wantDups {
				t.Errorf("duplicates counted = %d, want %d", got, tc.wantDups)
			}
			if len(mails) > 0 {
				m := mails[0]
				if len(m.To) != 1 || m.To[0].Address != "cus_1@"+receipt.RecipientDomain || m.Subject != "Receipt for your payment of 19.99 EUR" {
					t.Errorf("receipt = %+v", m)
				}
			}
			// Mailpit's search finds the receipt by its deterministic Message-ID.
			if got := len(f.mailpit.Search(t, "message-id:"+e.ID.String()+"@paylab.local")); got != tc.wantMails {
				t.Errorf("search by Message-ID found %d, want %d", got, tc.wantMails)
			}
		})
	}
}

func TestRefundReceiptWaitsForTheCaptureReceipt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.start(f.config(true))
	capture, refund := captured("ord-r", "cus_7", 5000, "JPY"), testenv.OrderRefunded("ord-r", 2, 1200, "JPY")
	f.Publish(refund)
	testenv.Eventually(t, 60*time.Second, "the refund parked", func() bool { return a.Runner.Counts().Parked == 1 })
	if n := len(f.mailpit.Messages(t)); n != 0 {
		t.Fatalf("%d emails sent before the capture", n)
	}
	f.Publish(capture)
	testenv.Eventually(t, 30*time.Second, "two receipts", func() bool { return len(f.mailpit.Messages(t)) == 2 })
	// A receipt is recorded after its email is sent (and in the inbox's
	// transaction): wait for both rows before comparing them.
	testenv.Eventually(t, 30*time.Second, "two receipts recorded", func() bool {
		return f.Count(`SELECT count(*) FROM notifications WHERE order_id = 'ord-r'`) == 2
	})
	if got := f.Count(`SELECT count(*) FROM notifications a JOIN notifications b ON a.order_id = b.order_id
		WHERE a.kind = 'capture_receipt' AND b.kind = 'refund_receipt' AND a.id < b.id`); got != 1 {
		t.Error("the refund receipt was not recorded after the capture receipt")
	}
	mails := f.mailsFor(refund)
	if len(mails) != 1 || mails[0].To[0].Address != "cus_7@"+receipt.RecipientDomain || mails[0].Subject != "Your refund of 1200 JPY" {
		t.Errorf("refund receipt = %+v", mails)
	}
}

// TestCrashAfterMarkBeforeOffsetCommit: the receipt's record and the inbox
// mark committed, the offset did not. The restarted process gets the event
// again: with the inbox it sends nothing more; without it, a second email.
func TestCrashAfterMarkBeforeOffsetCommit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		inboxEnabled bool
		wantMails    int
	}{
		{name: "inbox on: no second email", inboxEnabled: true, wantMails: 1},
		{name: "inbox off: second email", inboxEnabled: false, wantMails: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			cfg := f.config(tc.inboxEnabled)
			e := captured("ord-crash", "cus_9", 4200, "EUR")
			f.Publish(e)
			first := startChild(t, cfg, FaultAfterMarkBeforeOffsetCommit)
			if code := first.Wait(t, 60*time.Second); code != consumertest.CrashCode {
				t.Fatalf("exit code %d, want the crash code %d\n%s", code, consumertest.CrashCode, first.Output())
			}
			second := startChild(t, cfg, "")
			testenv.Eventually(t, 60*time.Second, "the redelivery", func() bool {
				return second.Metric("paylab_inbox_processed_total")+second.Metric("paylab_inbox_duplicates_total") >= 1
			})
			if got := len(f.mailsFor(e)); got != tc.wantMails {
				t.Errorf("emails = %d, want %d", got, tc.wantMails)
			}
			if got := f.Count("SELECT count(*) FROM notifications WHERE event_id = $1", e.ID); got != tc.wantMails {
				t.Errorf("notifications rows = %d, want %d", got, tc.wantMails)
			}
			second.Stop(t)
		})
	}
}

// TestCrashAfterSendBeforeMarkSendsTwiceWithOneMessageID documents the
// residual at-least-once at the SMTP boundary: the mail left before the
// transaction committed, so the redelivered event sends it again, even with
// the inbox. Both copies carry the same Message-ID, derived from the event
// id, which lets a receiving system recognise the second as a resend.
func TestCrashAfterSendBeforeMarkSendsTwiceWithOneMessageID(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cfg := f.config(true)
	e := captured("ord-smtp", "cus_5", 300, "EUR")
	f.Publish(e)
	first := startChild(t, cfg, receipt.FaultAfterSendBeforeMark)
	if code := first.Wait(t, 60*time.Second); code != consumertest.CrashCode {
		t.Fatalf("exit code %d, want the crash code %d\n%s", code, consumertest.CrashCode, first.Output())
	}
	if got := f.Count("SELECT count(*) FROM notifications"); got != 0 {
		t.Fatalf("%d rows recorded although the crash came before the commit", got)
	}
	second := startChild(t, cfg, "")
	testenv.Eventually(t, 60*time.Second, "the receipt recorded", func() bool {
		return f.Count("SELECT count(*) FROM notifications WHERE event_id = $1", e.ID) == 1
	})
	mails := f.mailsFor(e)
	if len(mails) != 2 {
		t.Fatalf("emails = %d, want 2 (the SMTP boundary is at-least-once)", len(mails))
	}
	if mails[0].MessageID != mails[1].MessageID {
		t.Errorf("the two copies have different Message-IDs: %q, %q", mails[0].MessageID, mails[1].MessageID)
	}
	second.Stop(t)
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	good := config{
		Config: consumersvc.Config{DatabaseURL: "postgres://x", KafkaBrokers: "k:1", OrdersTopic: "o",
			DeadLetterTopic: "o.dlq", ConsumerGroup: "g", InboxMaxAttempts: 1},
		SMTPAddr: net.JoinHostPort("127.0.0.1", "1025"), SMTPTimeout: time.Second, MailFrom: "r@paylab.local",
	}
	if err := good.validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	for _, tc := range []struct {
		name string
		mut  func(*config)
	}{
		{"SMTP_ADDR", func(c *config) { c.SMTPAddr = "nohost" }},
		{"MAIL_FROM", func(c *config) { c.MailFrom = "not an address" }},
		{"SMTP_TIMEOUT", func(c *config) { c.SMTPTimeout = 0 }},
		{"DEAD_LETTER_TOPIC", func(c *config) { c.DeadLetterTopic = c.OrdersTopic }},
	} {
		c := good
		tc.mut(&c)
		if err := c.validate(); err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s: error %v does not name the variable", tc.name, err)
		}
	}
}

// TestUnreachableSMTPServerDeadLettersThenRedriveSends: while the SMTP
// server is unreachable the receipt is retried, then dead-lettered and
// marked failed; the operator's re-drive sends it once the server is back.
func TestUnreachableSMTPServerDeadLettersThenRedriveSends(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	down := f.config(true)
	down.SMTPAddr = testenv.ClosedAddr(t) // nothing listens there
	down.SMTPTimeout = 2 * time.Second
	a := f.start(down)
	e := captured("ord-down", "cus_4", 800, "EUR")
	f.Publish(e)
	testenv.Eventually(t, 60*time.Second, "the receipt dead-lettered", func() bool { return a.Runner.Counts().DeadLettered == 1 })
	if got := f.Count("SELECT count(*) FROM inbox WHERE event_id = $1 AND status = 'failed' AND attempts = 3", e.ID); got != 1 {
		t.Fatal("the event is not failed after 3 attempts")
	}
	if n := len(f.mailpit.Messages(t)); n != 0 {
		t.Fatalf("%d emails sent", n)
	}
	if err := redrive(context.Background(), f.config(true), slog.New(slog.DiscardHandler), e.ID.String()); err != nil {
		t.Fatalf("redrive: %v", err)
	}
	if got := len(f.mailsFor(e)); got != 1 {
		t.Errorf("emails after the re-drive = %d, want 1", got)
	}
	if got := f.Count("SELECT count(*) FROM notifications WHERE event_id = $1", e.ID); got != 1 {
		t.Errorf("notifications rows = %d, want 1", got)
	}
}
