// Package migrations holds the versioned schema of paylab's three databases,
// embedded so every binary can migrate the database it owns. Each folder is one
// database; files are goose migrations applied in version order.
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed orders/*.sql ledger/*.sql notifications/*.sql
var files embed.FS

// Databases lists the databases paylab owns, one folder of migrations each.
var Databases = []string{"orders", "ledger", "notifications"}

// FS returns the migrations of one database (a folder of *.sql files).
func FS(database string) (fs.FS, error) {
	return fs.Sub(files, database)
}
