package outbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// walTable is the outbox table as the stream names it.
type walTable struct{ schema, name string }

func (t walTable) String() string { return t.schema + "." + t.name }

// checkPublication verifies that the relay's publication streams exactly
// the outbox table's inserts, and returns the table as the stream names
// it. A publication that lost the table (a DROP TABLE removes it, an ALTER
// PUBLICATION, a restore), holds other tables or publishes more than
// inserts is an error: streaming through it would confirm positions past
// events it never carried, or carry what the relay must not publish.
func (r *WALRelay) checkPublication(ctx context.Context) (walTable, error) {
	var (
		t                              walTable
		tableOK, pubOK, insert, others bool
		allTables                      bool
		tables                         []string
	)
	err := r.pool.QueryRow(ctx, `
		SELECT COALESCE(n.nspname, ''), COALESCE(c.relname, ''), c.oid IS NOT NULL, p.oid IS NOT NULL,
		       COALESCE(p.pubinsert, false), COALESCE(p.pubupdate OR p.pubdelete OR p.pubtruncate, false),
		       COALESCE(p.puballtables, false),
		       COALESCE((SELECT array_agg(pt.schemaname || '.' || pt.tablename ORDER BY 1)
		                 FROM pg_publication_tables pt WHERE pt.pubname = $1), '{}')
		FROM (SELECT to_regclass($2) AS oid) AS rel
		LEFT JOIN pg_class c ON c.oid = rel.oid
		LEFT JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_publication p ON p.pubname = $1`,
		r.cfg.Publication, pgx.Identifier{r.cfg.Table}.Sanitize(),
	).Scan(&t.schema, &t.name, &tableOK, &pubOK, &insert, &others, &allTables, &tables)
	if err != nil {
		return t, fmt.Errorf("checking publication %s: %w", r.cfg.Publication, err)
	}
	want := t.String()
	switch {
	case !tableOK:
		return t, fmt.Errorf("%w: the outbox table %s does not exist", errPublication, r.cfg.Table)
	case !pubOK:
		return t, fmt.Errorf("%w: publication %s does not exist (SetupWAL creates it)", errPublication, r.cfg.Publication)
	case allTables:
		return t, fmt.Errorf("%w: publication %s publishes every table; it must hold %s alone", errPublication, r.cfg.Publication, want)
	case !slices.Equal(tables, []string{want}):
		return t, fmt.Errorf("%w: publication %s holds %v, want exactly [%s] (ALTER PUBLICATION %s SET TABLE %s)",
			errPublication, r.cfg.Publication, tables, want, pgx.Identifier{r.cfg.Publication}.Sanitize(), pgx.Identifier{t.schema, t.name}.Sanitize())
	case !insert || others:
		return t, fmt.Errorf("%w: publication %s must publish inserts only (ALTER PUBLICATION %s SET (publish = 'insert'))",
			errPublication, r.cfg.Publication, pgx.Identifier{r.cfg.Publication}.Sanitize())
	}
	return t, nil
}

// errPublication marks a publication that does not stream exactly the
// outbox's inserts.
var errPublication = errors.New("the publication does not stream the outbox")

// readerHealth is what Ready reports: nil while this relay is a standby or
// a reader that streams; the reason while the reader cannot stream.
type readerHealth struct{ err atomic.Pointer[error] }

func (h *readerHealth) set(err error) {
	if err == nil {
		h.err.Store(nil)
		return
	}
	h.err.Store(&err)
}

func (h *readerHealth) get() error {
	if p := h.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Ready reports whether the relay does its part: nil for a standby and for
// a reader that streams, the reason for a reader that cannot (the slot is
// missing and cannot be created, the publication lost the table, the
// stream breaks at once) and for a relay that waits for its guard (polling
// relays still run on the table). Use it as a readiness check.
func (r *WALRelay) Ready(context.Context) error {
	if err := r.health.get(); err != nil {
		return fmt.Errorf("the WAL reader cannot stream: %w", err)
	}
	return nil
}
