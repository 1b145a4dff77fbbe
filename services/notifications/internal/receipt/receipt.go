// Package receipt sends a receipt email for every captured or refunded order
// and records it in the notifications table, inside the inbox's transaction.
//
// The email leaves the transaction's control: if the process dies after the
// SMTP server accepted the mail and before the transaction commits, the event
// is re-delivered and the receipt sent again. The Message-ID is derived from
// the event id, so both copies carry the same Message-ID and a receiving mail
// system (or the customer's client) can recognise the second as a resend.
package receipt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/pkg/inbox"
	"github.com/paylab/paylab/services/notifications/internal/mailer"
	"github.com/paylab/paylab/services/notifications/internal/notifydb"
)

// Event types with a receipt.
const (
	TypeOrderCaptured = "OrderCaptured"
	TypeOrderRefunded = "OrderRefunded"
)

// FaultAfterSendBeforeMark is the step boundary between the SMTP server
// accepting a receipt and the transaction that records it (and marks the
// event processed) committing. A crash or an error here rolls the
// transaction back and the event is delivered again (an error is a failed
// attempt, retried then dead-lettered like any handler error): the receipt
// is sent again, with the same Message-ID.
const FaultAfterSendBeforeMark = "notifications.after_send_before_mark"

// RecipientDomain is where customers' receipts go: paylab's events carry a
// customer id, not an address, so the address is <customer id>@RecipientDomain.
const RecipientDomain = "customers.paylab.local"

// ErrUnknownOrder is returned for a refund of an order whose capture receipt
// was never sent (retried, then dead-lettered; with the inbox on, ordering
// makes it impossible).
var ErrUnknownOrder = errors.New("receipt: refund of an order without a capture receipt")

// Sender sends one email.
type Sender interface {
	Send(ctx context.Context, m mailer.Mail) error
}

// Notifier builds and sends receipts.
type Notifier struct {
	Sender Sender
	From   string
	// Fault, when set, is called at named fault points (FaultAfterSendBeforeMark);
	// its error fails the handler.
	Fault func(ctx context.Context, point string) error
}

// Handlers returns the inbox handlers of the notifications service.
func (n *Notifier) Handlers() map[string]inbox.Handler {
	return map[string]inbox.Handler{TypeOrderCaptured: n.captured, TypeOrderRefunded: n.refunded}
}

// MessageID is the Message-ID of the receipt for an event.
func MessageID(eventID uuid.UUID) string { return "<" + eventID.String() + "@paylab.local>" }

type captured struct {
	OrderID    string `json:"order_id"`
	CustomerID string `json:"customer_id"`
	Amount     int64  `json:"amount"`
	Currency   string `json:"currency"`
}

type refunded struct {
	OrderID  string `json:"order_id"`
	RefundID string `json:"refund_id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

var (
	currencyCode = regexp.MustCompile(`^[A-Z]{3}$`)
	customerID   = regexp.MustCompile(`^[A-Za-z0-9._+-]{1,64}$`)
)

func (n *Notifier) captured(ctx context.Context, tx pgx.Tx, msg inbox.Message) error {
	var c captured
	if err := decode(msg, &c); err != nil {
		return err
	}
	if !customerID.MatchString(c.CustomerID) {
		return inbox.Permanent(fmt.Errorf("customer_id %q cannot form an address", c.CustomerID))
	}
	if err := validate(c.OrderID, c.Amount, c.Currency); err != nil {
		return err
	}
	to := c.CustomerID + "@" + RecipientDomain
	subject := fmt.Sprintf("Receipt for your payment of %s", Money(c.Amount, c.Currency))
	body := fmt.Sprintf("Thank you for your payment.\n\nOrder:  %s\nAmount: %s\n\nThis is your receipt.\n",
		c.OrderID, Money(c.Amount, c.Currency))
	return n.send(ctx, tx, msg, "capture_receipt", c.OrderID, c.CustomerID, to, subject, body)
}

func (n *Notifier) refunded(ctx context.Context, tx pgx.Tx, msg inbox.Message) error {
	var r refunded
	if err := decode(msg, &r); err != nil {
		return err
	}
	if err := validate(r.OrderID, r.Amount, r.Currency); err != nil {
		return err
	}
	cust, err := notifydb.New(tx).OrderCustomer(ctx, r.OrderID)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %s", ErrUnknownOrder, r.OrderID)
	}
	if err != nil {
		return fmt.Errorf("reading the customer of order %s: %w", r.OrderID, err)
	}
	subject := fmt.Sprintf("Your refund of %s", Money(r.Amount, r.Currency))
	body := fmt.Sprintf("We have refunded part or all of your payment.\n\nOrder:  %s\nRefund: %s\nAmount: %s\n",
		r.OrderID, r.RefundID, Money(r.Amount, r.Currency))
	return n.send(ctx, tx, msg, "refund_receipt", r.OrderID, cust.CustomerID, cust.Recipient, subject, body)
}

// send mails the receipt, then records it in tx. The record commits with the
// inbox mark; the mail cannot be part of that transaction.
func (n *Notifier) send(ctx context.Context, tx pgx.Tx, msg inbox.Message, kind, orderID, customer, to, subject, body string) error {
	m := mailer.Mail{
		From: n.From, To: to, Subject: subject, MessageID: MessageID(msg.ID), Date: time.Now(), Body: body,
		Headers: map[string]string{"X-Paylab-Event-Id": msg.ID.String(), "X-Paylab-Order-Id": orderID},
	}
	if err := n.Sender.Send(ctx, m); err != nil {
		return fmt.Errorf("sending %s for order %s: %w", kind, orderID, err)
	}
	if n.Fault != nil {
		if err := n.Fault(ctx, FaultAfterSendBeforeMark); err != nil {
			return fmt.Errorf("after sending %s for order %s: %w", kind, orderID, err)
		}
	}
	if err := notifydb.New(tx).RecordSent(ctx, notifydb.RecordSentParams{
		EventID: msg.ID, OrderID: orderID, Kind: kind, CustomerID: customer, Recipient: to,
		MessageID: m.MessageID, Subject: subject,
	}); err != nil {
		return fmt.Errorf("recording %s for order %s: %w", kind, orderID, err)
	}
	return nil
}

func decode(msg inbox.Message, v any) error {
	if err := json.NewDecoder(bytes.NewReader(msg.Data)).Decode(v); err != nil {
		return inbox.Permanent(fmt.Errorf("decoding %s payload: %w", msg.Type, err))
	}
	return nil
}

func validate(orderID string, amount int64, currency string) error {
	switch {
	case orderID == "":
		return inbox.Permanent(errors.New("order_id is empty"))
	case amount <= 0:
		return inbox.Permanent(fmt.Errorf("amount %d is not positive", amount))
	case !currencyCode.MatchString(currency):
		return inbox.Permanent(fmt.Errorf("currency %q is not an ISO 4217 code", currency))
	}
	return nil
}
