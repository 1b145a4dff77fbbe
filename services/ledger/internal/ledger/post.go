package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/platform/pgpipe"
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

// Handlers returns the inbox handlers of the ledger: each applies its one
// event with Apply.
func Handlers() map[string]inbox.Handler {
	one := func(ctx context.Context, tx pgx.Tx, msg inbox.Message) error {
		return Apply(ctx, tx, []inbox.Message{msg})
	}
	return map[string]inbox.Handler{TypeOrderCaptured: one, TypeOrderRefunded: one}
}

// entry is the journal entry of one event: its postings, credit positive
// and debit negative, sum to zero.
type entry struct {
	msg      inbox.Message
	orderID  string
	kind     string // capture | refund
	refundID string
	currency string
	lines    [2]posting
}

type posting struct {
	account string
	amount  int64
}

// Apply posts a run of OrderCaptured and OrderRefunded events, in order, with
// a fixed number of statements whatever their count (inbox.BatchHandler):
//
//   - a capture debits the customer's funds and credits the merchant's
//     payable with the amount; a refund reverses that for its amount;
//   - the orders' captured and refunded amounts are kept in ledger_orders
//     (a refund finds its accounts there, its capture possibly earlier in
//     the same run);
//   - the balances are updated last, in one statement, in sorted order of
//     account and currency, after the entries were checked to balance (the
//     deferred postings_balanced trigger, run early): concurrent runs over
//     the same accounts (every run touches the busiest merchants) lock the
//     shared balance rows in the same order, so they queue for the last
//     statement and the commit only, and cannot deadlock.
//
// The writes whose results are only their errors travel together with the
// next read, or at the end (pgpipe): a run of captures takes two round trips
// to the database, not seven.
//
// A payload that cannot be applied fails the run with a permanent error.
func Apply(ctx context.Context, tx pgx.Tx, msgs []inbox.Message) (err error) {
	w := pgpipe.New(tx)
	q := ledgerdb.New(w)
	var captures, refunds []*entry
	entries := make([]*entry, 0, len(msgs))
	for _, msg := range msgs {
		e, err := parse(msg)
		if err != nil {
			return err
		}
		entries = append(entries, e)
		if e.kind == "capture" {
			captures = append(captures, e)
		} else {
			refunds = append(refunds, e)
		}
	}
	end := startPosts(ctx, entries)
	defer func() { end(err) }()
	if err := recordCaptures(ctx, q, captures); err != nil {
		return err
	}
	if err := recordRefunds(ctx, q, refunds); err != nil {
		return err
	}
	if err := insertEntries(ctx, q, entries); err != nil {
		return err
	}
	// Check that every entry balances now, while no shared row is locked,
	// rather than at commit, when the balances below are.
	if err := q.CheckBalanced(ctx); err != nil {
		return fmt.Errorf("checking that %d entries balance: %w", len(entries), err)
	}
	if err := updateBalances(ctx, q, entries); err != nil {
		return err
	}
	if err := w.Flush(ctx); err != nil {
		return fmt.Errorf("posting %d entries: %w", len(entries), err)
	}
	return nil
}

// parse decodes and validates one event into its entry; a refund's lines are
// filled in by recordRefunds.
func parse(msg inbox.Message) (*entry, error) {
	switch msg.Type {
	case TypeOrderCaptured:
		var c Captured
		if err := decode(msg, &c); err != nil {
			return nil, err
		}
		if err := validate(c.OrderID, c.Amount, c.Currency, c.CustomerID, c.MerchantID); err != nil {
			return nil, err
		}
		customer, merchant := CustomerAccount(c.CustomerID), MerchantAccount(c.MerchantID)
		return &entry{msg: msg, orderID: c.OrderID, kind: "capture", currency: c.Currency,
			lines: [2]posting{{customer, -c.Amount}, {merchant, c.Amount}}}, nil
	case TypeOrderRefunded:
		var r Refunded
		if err := decode(msg, &r); err != nil {
			return nil, err
		}
		if err := validate(r.OrderID, r.Amount, r.Currency); err != nil {
			return nil, err
		}
		return &entry{msg: msg, orderID: r.OrderID, kind: "refund", refundID: r.RefundID, currency: r.Currency,
			lines: [2]posting{{"", -r.Amount}, {"", r.Amount}}}, nil // merchant −, customer +
	}
	return nil, inbox.Permanent(fmt.Errorf("the ledger does not apply %s events", msg.Type))
}

// recordCaptures creates the captures' accounts and records the captured
// amounts, one row per order.
func recordCaptures(ctx context.Context, q *ledgerdb.Queries, captures []*entry) error {
	if len(captures) == 0 {
		return nil
	}
	type capture struct {
		customer, merchant, currency string
		amount                       int64
	}
	kinds := map[string]string{}
	byOrder := map[string]*capture{}
	var orders []string
	for _, c := range captures {
		customer, merchant := c.lines[0].account, c.lines[1].account
		kinds[customer], kinds[merchant] = KindCustomerFunds, KindMerchantPayable
		if o, ok := byOrder[c.orderID]; ok { // captured twice (only with the inbox off)
			o.amount += c.lines[1].amount
			continue
		}
		byOrder[c.orderID] = &capture{customer, merchant, c.currency, c.lines[1].amount}
		orders = append(orders, c.orderID)
	}
	accounts := ledgerdb.EnsureAccountsParams{}
	for _, id := range slices.Sorted(maps.Keys(kinds)) {
		accounts.Ids, accounts.Kinds = append(accounts.Ids, id), append(accounts.Kinds, kinds[id])
	}
	if err := q.EnsureAccounts(ctx, accounts); err != nil {
		return fmt.Errorf("creating %d accounts: %w", len(accounts.Ids), err)
	}
	p := ledgerdb.RecordCapturesParams{}
	for _, id := range orders {
		o := byOrder[id]
		p.OrderIds, p.CustomerAccounts = append(p.OrderIds, id), append(p.CustomerAccounts, o.customer)
		p.MerchantAccounts, p.Currencies = append(p.MerchantAccounts, o.merchant), append(p.Currencies, o.currency)
		p.Amounts = append(p.Amounts, o.amount)
	}
	if err := q.RecordCaptures(ctx, p); err != nil {
		return fmt.Errorf("recording the captures of %d orders: %w", len(orders), err)
	}
	return nil
}

// recordRefunds finds the refunded orders' accounts, fills in the refunds'
// lines and records the refunded amounts, one row per order.
func recordRefunds(ctx context.Context, q *ledgerdb.Queries, refunds []*entry) error {
	if len(refunds) == 0 {
		return nil
	}
	amounts := map[string]int64{}
	for _, r := range refunds {
		amounts[r.orderID] += r.lines[1].amount
	}
	ids := slices.Sorted(maps.Keys(amounts))
	rows, err := q.Orders(ctx, ids)
	if err != nil {
		return fmt.Errorf("reading %d orders: %w", len(ids), err)
	}
	orders := map[string]ledgerdb.LedgerOrder{}
	for _, o := range rows {
		orders[o.OrderID] = o
	}
	for _, r := range refunds {
		o, ok := orders[r.orderID]
		if !ok {
			return fmt.Errorf("%w: %s", ErrUnknownOrder, r.orderID)
		}
		if o.Currency != r.currency {
			return inbox.Permanent(fmt.Errorf("refund in %s of an order captured in %s", r.currency, o.Currency))
		}
		r.lines[0].account, r.lines[1].account = o.MerchantAccount, o.CustomerAccount
	}
	p := ledgerdb.RecordRefundsParams{OrderIds: ids}
	for _, id := range ids {
		p.Amounts = append(p.Amounts, amounts[id])
	}
	if err := q.RecordRefunds(ctx, p); err != nil {
		return fmt.Errorf("recording the refunds of %d orders: %w", len(ids), err)
	}
	return nil
}

// insertEntries writes one journal entry per event and its postings.
func insertEntries(ctx context.Context, q *ledgerdb.Queries, entries []*entry) error {
	ids, err := q.NextEntryIDs(ctx, int32(len(entries)))
	if err != nil {
		return fmt.Errorf("reserving %d journal entry ids: %w", len(entries), err)
	}
	ep := ledgerdb.InsertEntriesParams{Ids: ids}
	pp := ledgerdb.InsertPostingsParams{}
	for i, e := range entries {
		if e.lines[0].amount+e.lines[1].amount != 0 {
			return inbox.Permanent(fmt.Errorf("entry for %s does not balance", e.orderID))
		}
		ep.EventIds, ep.OrderIds = append(ep.EventIds, e.msg.ID), append(ep.OrderIds, e.orderID)
		ep.Kinds, ep.RefundIds = append(ep.Kinds, e.kind), append(ep.RefundIds, e.refundID)
		for _, l := range e.lines {
			pp.EntryIds, pp.AccountIds = append(pp.EntryIds, ids[i]), append(pp.AccountIds, l.account)
			pp.Currencies, pp.Amounts = append(pp.Currencies, e.currency), append(pp.Amounts, l.amount)
		}
	}
	if err := q.InsertEntries(ctx, ep); err != nil {
		return fmt.Errorf("inserting %d journal entries: %w", len(entries), err)
	}
	if err := q.InsertPostings(ctx, pp); err != nil {
		return fmt.Errorf("inserting %d postings: %w", len(pp.EntryIds), err)
	}
	return nil
}

// updateBalances adds the postings to their balances, one row per account
// and currency, in sorted order.
func updateBalances(ctx context.Context, q *ledgerdb.Queries, entries []*entry) error {
	type key struct{ account, currency string }
	sums := map[key]int64{}
	for _, e := range entries {
		for _, l := range e.lines {
			sums[key{l.account, e.currency}] += l.amount
		}
	}
	keys := slices.SortedFunc(maps.Keys(sums), func(a, b key) int {
		return cmp.Or(cmp.Compare(a.account, b.account), cmp.Compare(a.currency, b.currency))
	})
	p := ledgerdb.AddToBalancesParams{}
	for _, k := range keys {
		p.AccountIds, p.Currencies, p.Amounts = append(p.AccountIds, k.account), append(p.Currencies, k.currency), append(p.Amounts, sums[k])
	}
	if err := q.AddToBalances(ctx, p); err != nil {
		return fmt.Errorf("updating %d balances: %w", len(p.AccountIds), err)
	}
	return nil
}
