// Package migrations holds the versioned schema of paylab's three databases,
// embedded so every binary can migrate the database it owns. Each folder is one
// database's own tables; the outbox and inbox tables come from the packages
// that own them (pkg/outbox, pkg/inbox), rendered into the same sequence of
// goose migrations at fixed version numbers. FS gives the combined set.
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
	"testing/fstest"

	inboxschema "github.com/paylab/paylab/pkg/inbox/migrations"
	outboxschema "github.com/paylab/paylab/pkg/outbox/migrations"
)

//go:embed orders/*.sql ledger/*.sql notifications/*.sql
var files embed.FS

// Databases lists the databases paylab owns, one folder of migrations each.
var Databases = []string{"orders", "ledger", "notifications"}

// packaged is a migration of pkg/outbox or pkg/inbox rendered for one of
// paylab's databases.
type packaged struct {
	Version  int // the package's version
	Name     string
	Up, Down string
}

// packageVersions maps each database's package migrations to the goose
// versions they were applied under before the packages owned their schema
// (orders: the outbox at 00002, 00010, 00011; ledger and notifications: the
// inbox at 00001), so existing databases see nothing new. A package
// migration added later gets a version after the database's last.
var packageVersions = map[string]map[int]int{
	"orders":        {1: 2, 2: 10, 3: 11, 4: 12, 5: 13, 6: 14, 7: 17, 8: 18},
	"ledger":        {1: 1},
	"notifications": {1: 1},
}

// FS returns the migrations of one database: its folder's *.sql files and
// the package migrations it uses (the outbox for orders, the inbox for
// ledger and notifications, with their default table names), as goose SQL
// files.
func FS(database string) (fs.FS, error) {
	own, err := fs.Sub(files, database)
	if err != nil {
		return nil, err
	}
	versions, ok := packageVersions[database]
	if !ok {
		return nil, fmt.Errorf("unknown database %q", database)
	}
	pkgs, err := packageMigrations(database)
	if err != nil {
		return nil, err
	}
	out := fstest.MapFS{}
	entries, err := fs.ReadDir(own, ".")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		b, err := fs.ReadFile(own, e.Name())
		if err != nil {
			return nil, err
		}
		out[e.Name()] = &fstest.MapFile{Data: b, Mode: 0o444}
	}
	for _, m := range pkgs {
		v, ok := versions[m.Version]
		if !ok {
			return nil, fmt.Errorf("%s: package migration %d (%s) has no version in the database's history", database, m.Version, m.Name)
		}
		name := fmt.Sprintf("%05d_%s.sql", v, m.Name)
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s: migration %s exists twice", database, name)
		}
		out[name] = &fstest.MapFile{Data: []byte("-- +goose Up\n" + m.Up + "\n-- +goose Down\n" + m.Down), Mode: 0o444}
	}
	return out, nil
}

// packageMigrations returns the package migrations database uses.
func packageMigrations(database string) ([]packaged, error) {
	var out []packaged
	switch database {
	case "orders":
		ms, err := outboxschema.Migrations(outboxschema.DefaultTable)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			out = append(out, packaged{Version: m.Version, Name: m.Name, Up: m.Up, Down: m.Down})
		}
	case "ledger", "notifications":
		ms, err := inboxschema.Migrations(inboxschema.DefaultTable)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			out = append(out, packaged{Version: m.Version, Name: m.Name, Up: m.Up, Down: m.Down})
		}
	}
	return out, nil
}
