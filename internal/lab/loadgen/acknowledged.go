package loadgen

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Acknowledged records the orders the API acknowledged (a 201) as it
// answers: the promise the reconciliation holds the database to after a
// failover. Use Add as Config.OnCreated; it is safe from many goroutines.
type Acknowledged struct {
	mu  sync.Mutex
	ids []string
	w   *bufio.Writer // nil: kept in memory only
	err error
}

// NewAcknowledged records in memory and, when w is not nil, one order id a
// line to w (Flush before reading it back).
func NewAcknowledged(w io.Writer) *Acknowledged {
	a := &Acknowledged{}
	if w != nil {
		a.w = bufio.NewWriter(w)
	}
	return a
}

// Add records order id as acknowledged.
func (a *Acknowledged) Add(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ids = append(a.ids, id)
	if a.w != nil && a.err == nil {
		_, a.err = a.w.WriteString(id + "\n")
	}
}

// IDs are the acknowledged orders so far.
func (a *Acknowledged) IDs() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.ids...)
}

// Flush writes what is buffered and returns the first write error.
func (a *Acknowledged) Flush() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.w != nil && a.err == nil {
		a.err = a.w.Flush()
	}
	return a.err
}

// ReadAcknowledged reads a record NewAcknowledged wrote: one order id a line.
func ReadAcknowledged(r io.Reader) ([]string, error) {
	var ids []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if id := strings.TrimSpace(sc.Text()); id != "" {
			ids = append(ids, id)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the acknowledged orders: %w", err)
	}
	return ids, nil
}

// Missing returns the acknowledged orders that the orders database at
// ordersURL does not hold: payments the API answered 201 that are lost,
// as an asynchronous replica promoted after its leader's crash loses them.
// The URL may list every member of a replicated cluster with
// target_session_attrs=read-write: the question is for the leader.
func Missing(ctx context.Context, ordersURL string, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	conn, err := pgx.Connect(ctx, ordersURL)
	if err != nil {
		return nil, fmt.Errorf("connecting to the orders database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT a.id FROM unnest($1::text[]) AS a(id)
		WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.id::text = a.id) ORDER BY a.id`, ids)
	if err != nil {
		return nil, fmt.Errorf("looking up the acknowledged orders: %w", err)
	}
	missing, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("looking up the acknowledged orders: %w", err)
	}
	return missing, nil
}
