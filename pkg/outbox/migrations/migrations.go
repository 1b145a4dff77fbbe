// Package migrations holds the schema of package outbox (its parent):
// *.sql, embedded, one file per version, each with a "-- +goose Up" and a
// "-- +goose Down" section (the goose format, which sqlc reads too). Every name the package creates or
// queries is written "/* TEMPLATE: table */outbox…" in the SQL: the table, its
// indexes. Rendering for a table replaces that prefix, so a table
// "shop_outbox" gets the indexes "shop_outbox_pending_idx", and so on.
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

//go:embed *.sql
var migrationFiles embed.FS

// tableMarker precedes the default table name wherever the SQL names the
// table (or a name derived from it).
const tableMarker = "/* TEMPLATE: table */" + DefaultTable

// DefaultTable is the table name the SQL files are written with.
const DefaultTable = "outbox"

// tableName is what Config.Table accepts: a plain lower-case identifier,
// short enough that every name derived from it fits PostgreSQL's 63 bytes.
var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,39}$`)

// ValidateTable reports whether table is a name the package accepts.
func ValidateTable(table string) error {
	if !tableName.MatchString(table) {
		return fmt.Errorf("table name %q is not a lower-case SQL identifier of at most 40 characters", table)
	}
	return nil
}

// Render returns sql, written with the template marker, for table.
func Render(sql, table string) string { return strings.ReplaceAll(sql, tableMarker, table) }

// Migration is one version of the outbox's schema, rendered for a table: the
// SQL to apply it (Up) and to revert it (Down). Versions start at 1 and have
// no gaps; apply them in order.
type Migration struct {
	Version int
	Name    string // e.g. "outbox_storage", from the file name
	Up      string
	Down    string
}

// Migrations returns the schema migrations rendered for table (""
// means DefaultTable), in version order, for the caller's own migration
// tool: write each to a file of that tool or register it as a code
// migration. outbox.Migrate applies them for those without a tool.
func Migrations(table string) ([]Migration, error) {
	if table == "" {
		table = DefaultTable
	}
	if err := ValidateTable(table); err != nil {
		return nil, fmt.Errorf("outbox migrations: %w", err)
	}
	names, err := fs.Glob(migrationFiles, "*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]Migration, 0, len(names))
	for _, name := range names {
		base := strings.TrimSuffix(path.Base(name), ".sql")
		num, label, _ := strings.Cut(base, "_")
		version, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("outbox migrations: migration %s has no version number", name)
		}
		if version != len(out)+1 {
			return nil, fmt.Errorf("outbox migrations: migration %s: version %d, want %d", name, version, len(out)+1)
		}
		b, err := migrationFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		up, down, err := splitGoose(string(b))
		if err != nil {
			return nil, fmt.Errorf("outbox migrations: migration %s: %w", name, err)
		}
		out = append(out, Migration{Version: version, Name: label, Up: Render(up, table), Down: Render(down, table)})
	}
	return out, nil
}

// splitGoose splits a goose SQL file into its Up and Down sections.
func splitGoose(sql string) (up, down string, err error) {
	const upMark, downMark = "-- +goose Up\n", "-- +goose Down\n"
	_, rest, ok := strings.Cut(sql, upMark)
	if !ok {
		return "", "", fmt.Errorf("no %q section", strings.TrimSpace(upMark))
	}
	up, down, ok = strings.Cut(rest, downMark)
	if !ok {
		return "", "", fmt.Errorf("no %q section", strings.TrimSpace(downMark))
	}
	return strings.TrimSpace(up) + "\n", strings.TrimSpace(down) + "\n", nil
}
