package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/pkg/inbox"
	"github.com/paylab/paylab/services/ledger/internal/ledgerdb"
)

// Account kinds and id prefixes.
const (
	KindCustomerFunds   = "customer_funds"
	KindMerchantPayable = "merchant_payable"
)

// CustomerAccount and MerchantAccount name the accounts of a party.
func CustomerAccount(customerID string) string { return "customer:" + customerID }
func MerchantAccount(merchantID string) string { return "merchant:" + merchantID }

// ErrUnknownOrder is returned for a refund of an order the ledger has no
// capture for. With the inbox on it cannot happen (a refund waits for its
// capture); it is retried, then dead-lettered.
var ErrUnknownOrder = errors.New("ledger: refund of an order without a capture")

// Handlers returns the inbox handlers of the ledger.
func Handlers() map[string]inbox.Handler {
	return map[string]inbox.Handler{
		TypeOrderCaptured: ApplyCaptured,
		TypeOrderRefunded: ApplyRefunded,
	}
}

// posting is one line of a journal entry: credit positive, debit negative.
type posting struct {
	account string
	amount  int64
}

// ApplyCaptured posts a capture: the customer's funds are debited and the
// merchant's payable credited with the amount.
func ApplyCaptured(ctx context.Context, tx pgx.Tx, msg inbox.Message) error {
	var c Captured
	if err := decode(msg, &c); err != nil {
		return err
	}
	if err := validate(c.OrderID, c.Amount, c.Currency, c.CustomerID, c.MerchantID); err != nil {
		return err
	}
	q := ledgerdb.New(tx)
	customer, merchant := CustomerAccount(c.CustomerID), MerchantAccount(c.MerchantID)
	for _, a := range sortedAccounts(map[string]string{customer: KindCustomerFunds, merchant: KindMerchantPayable}) {
		if err := q.EnsureAccount(ctx, ledgerdb.EnsureAccountParams{ID: a[0], Kind: a[1]}); err != nil {
			return fmt.Errorf("creating account %s: %w", a[0], err)
		}
	}
	if err := lockAccounts(ctx, q, customer, merchant); err != nil {
		return err
	}
	if err := q.RecordCapture(ctx, ledgerdb.RecordCaptureParams{
		OrderID: c.OrderID, CustomerAccount: customer, MerchantAccount: merchant,
		Currency: c.Currency, CapturedAmount: c.Amount,
	}); err != nil {
		return fmt.Errorf("recording capture of order %s: %w", c.OrderID, err)
	}
	return post(ctx, q, msg, c.OrderID, "capture", nil, c.Currency,
		posting{customer, -c.Amount}, posting{merchant, c.Amount})
}

// ApplyRefunded posts the reversal of a capture for the refunded amount.
func ApplyRefunded(ctx context.Context, tx pgx.Tx, msg inbox.Message) error {
	var r Refunded
	if err := decode(msg, &r); err != nil {
		return err
	}
	if err := validate(r.OrderID, r.Amount, r.Currency); err != nil {
		return err
	}
	q := ledgerdb.New(tx)
	order, err := q.Order(ctx, r.OrderID)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %s", ErrUnknownOrder, r.OrderID)
	}
	if err != nil {
		return fmt.Errorf("reading order %s: %w", r.OrderID, err)
	}
	if order.Currency != r.Currency {
		return inbox.Permanent(fmt.Errorf("refund in %s of an order captured in %s", r.Currency, order.Currency))
	}
	if err := lockAccounts(ctx, q, order.CustomerAccount, order.MerchantAccount); err != nil {
		return err
	}
	if err := q.RecordRefund(ctx, ledgerdb.RecordRefundParams{OrderID: r.OrderID, RefundedAmount: r.Amount}); err != nil {
		return fmt.Errorf("recording refund of order %s: %w", r.OrderID, err)
	}
	var refundID *string
	if r.RefundID != "" {
		refundID = &r.RefundID
	}
	return post(ctx, q, msg, r.OrderID, "refund", refundID, r.Currency,
		posting{order.MerchantAccount, -r.Amount}, posting{order.CustomerAccount, r.Amount})
}

// lockAccounts locks the accounts an entry will touch, in sorted order, and
// before anything else in the transaction refers to them: concurrent entries
// over the same accounts then queue instead of deadlocking. (A foreign key
// check takes a KEY SHARE lock on the account; taking it before this lock
// would let two transactions each hold one and wait for the other.) FOR NO
// KEY UPDATE serialises entries without blocking other foreign key checks.
func lockAccounts(ctx context.Context, q *ledgerdb.Queries, ids ...string) error {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	if _, err := q.LockAccounts(ctx, slices.Compact(ids)); err != nil {
		return fmt.Errorf("locking accounts %v: %w", ids, err)
	}
	return nil
}

// post writes a journal entry whose accounts the caller has locked, and
// updates the balances in sorted account order, in a span of its own
// ("ledger post entry") under the inbox's span of the event.
func post(ctx context.Context, q *ledgerdb.Queries, msg inbox.Message, orderID, kind string, refundID *string,
	currency string, lines ...posting) (err error) {
	ctx, span := startPost(ctx, msg, orderID, kind, len(lines))
	defer func() { endSpan(span, err) }()
	var total int64
	for _, l := range lines {
		total += l.amount
	}
	if total != 0 {
		return inbox.Permanent(fmt.Errorf("entry for %s does not balance: %d", orderID, total))
	}
	entryID, err := q.InsertEntry(ctx, ledgerdb.InsertEntryParams{EventID: msg.ID, OrderID: orderID, Kind: kind, RefundID: refundID})
	if err != nil {
		return fmt.Errorf("inserting %s entry of order %s: %w", kind, orderID, err)
	}
	slices.SortFunc(lines, func(a, b posting) int { return cmp.Compare(a.account, b.account) })
	for _, l := range lines {
		if err := q.InsertPosting(ctx, ledgerdb.InsertPostingParams{EntryID: entryID, AccountID: l.account, Currency: currency, Amount: l.amount}); err != nil {
			return fmt.Errorf("posting to %s: %w", l.account, err)
		}
		if err := q.AddToBalance(ctx, ledgerdb.AddToBalanceParams{AccountID: l.account, Currency: currency, Balance: l.amount}); err != nil {
			return fmt.Errorf("updating balance of %s: %w", l.account, err)
		}
	}
	return nil
}

func sortedAccounts(m map[string]string) [][2]string {
	out := make([][2]string, 0, len(m))
	for id, kind := range m {
		out = append(out, [2]string{id, kind})
	}
	slices.SortFunc(out, func(a, b [2]string) int { return cmp.Compare(a[0], b[0]) })
	return out
}
