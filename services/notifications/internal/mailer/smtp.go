// Package mailer sends email over SMTP (net/smtp: plain SMTP, as Mailpit and
// a local relay speak it; STARTTLS is used when the server offers it).
package mailer

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/smtp"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Mail is one plain-text email.
type Mail struct {
	From      string
	To        string
	Subject   string
	MessageID string // "<id@domain>"; receivers use it to recognise a resend
	Date      time.Time
	Headers   map[string]string // extra headers, e.g. X-Paylab-Event-Id
	Body      string
}

// SMTP sends mail through one SMTP server.
type SMTP struct {
	Addr    string        // host:port
	Timeout time.Duration // of one whole send; default 10s
}

// Send delivers m: it returns nil once the server accepted the message (a
// QUIT that fails after that is an event on the span, not an error). The
// conversation runs in a CLIENT span "smtp send", a child of the span in ctx.
func (s *SMTP) Send(ctx context.Context, m Mail) (err error) {
	ctx, span := s.startSend(ctx, m)
	defer func() { endSend(span, err) }()
	timeout := s.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("connecting to SMTP server %s: %w", s.Addr, err)
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	host, _, _ := net.SplitHostPort(s.Addr)
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return fmt.Errorf("greeting SMTP server %s: %w", s.Addr, err)
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok {
		if err := c.StartTLS(&tls.Config{ServerName: host}); err != nil {
			return fmt.Errorf("starting TLS with %s: %w", s.Addr, err)
		}
	}
	if err := c.Mail(m.From); err != nil {
		return fmt.Errorf("MAIL FROM %s: %w", m.From, err)
	}
	if err := c.Rcpt(m.To); err != nil {
		return fmt.Errorf("RCPT TO %s: %w", m.To, err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	if _, err := w.Write(m.bytes()); err != nil {
		return fmt.Errorf("writing message: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("ending message: %w", err)
	}
	// The server answered 250 to the message's end: it has the message.
	// Failing now, when QUIT goes unanswered or is answered with an error,
	// would have the caller retry and the recipient get the email twice.
	if err := c.Quit(); err != nil {
		trace.SpanFromContext(ctx).AddEvent("smtp quit failed after the message was accepted",
			trace.WithAttributes(attribute.String("error", err.Error())))
	}
	return nil
}

// bytes renders the message (RFC 5322, CRLF line ends).
func (m Mail) bytes() []byte {
	var b bytes.Buffer
	h := func(k, v string) {
		fmt.Fprintf(&b, "%s: %s\r\n", k, strings.NewReplacer("\r", "", "\n", "").Replace(v))
	}
	h("From", m.From)
	h("To", m.To)
	h("Subject", m.Subject)
	h("Date", m.Date.Format(time.RFC1123Z))
	h("Message-ID", m.MessageID)
	for k, v := range m.Headers {
		h(k, v)
	}
	h("MIME-Version", "1.0")
	h("Content-Type", "text/plain; charset=utf-8")
	h("Content-Transfer-Encoding", "8bit")
	b.WriteString("\r\n")
	// net/smtp's data writer does the dot-stuffing.
	for _, line := range strings.Split(m.Body, "\n") {
		b.WriteString(strings.TrimRight(line, "\r") + "\r\n")
	}
	return b.Bytes()
}
