package deploycheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// composePostgresSettings are the -c settings of compose's postgres
// command.
func composePostgresSettings(t *testing.T) map[string]string {
	t.Helper()
	pg, ok := loadCompose(t).Services["postgres"]
	if !ok {
		t.Fatal("no postgres service")
	}
	settings := map[string]string{}
	for i, arg := range pg.Command {
		if arg == "-c" && i+1 < len(pg.Command) {
			k, v, _ := strings.Cut(pg.Command[i+1], "=")
			settings[k] = v
		}
	}
	return settings
}

// stackPostgresSettings are the settings scripts/stack.sh writes into
// paylab.conf, which every data folder it starts includes.
func stackPostgresSettings(t *testing.T) map[string]string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "scripts", "stack.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)cat >"\$PG_DATA/paylab\.conf" <<CONF\n(.*?)\nCONF\n`).FindSubmatch(src)
	if m == nil {
		t.Fatal("scripts/stack.sh writes no paylab.conf")
	}
	settings := map[string]string{}
	for line := range strings.Lines(string(m[1])) {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("paylab.conf line %q is not a setting", line)
		}
		settings[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), "'")
	}
	return settings
}

// walSize is a PostgreSQL size setting in bytes (a bare number is in MB,
// max_slot_wal_keep_size's unit); -1 for no limit.
func walSize(v string) (int64, bool) {
	units := map[string]int64{"kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}
	m := regexp.MustCompile(`^(-?[0-9]+)\s*(kB|MB|GB|TB)?$`).FindStringSubmatch(v)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, false
	}
	if n < 0 {
		return -1, true
	}
	unit := units["MB"]
	if m[2] != "" {
		unit = units[m[2]]
	}
	return n * unit, true
}

// Both PostgreSQL servers — compose's and the local stack's — decode the
// outbox's inserts for the WAL relay (wal_level=logical), and bound the WAL
// a replication slot may hold back: without max_slot_wal_keep_size a slot
// nobody reads keeps every WAL segment until the disk fills. The two keep
// the same limit, so the WAL relay meets the same invalidation in both.
func TestReplicationSlotsHoldBoundedWAL(t *testing.T) {
	t.Parallel()
	compose, stack := composePostgresSettings(t), stackPostgresSettings(t)
	for name, settings := range map[string]map[string]string{"docker-compose.yml": compose, "scripts/stack.sh": stack} {
		if settings["wal_level"] != "logical" {
			t.Errorf("%s: wal_level %q; the WAL relay needs logical", name, settings["wal_level"])
		}
		raw, ok := settings["max_slot_wal_keep_size"]
		size, valid := walSize(raw)
		switch {
		case !ok:
			t.Errorf("%s: max_slot_wal_keep_size is not set (the default, -1, lets a slot keep all WAL)", name)
		case !valid:
			t.Errorf("%s: max_slot_wal_keep_size %q is not a size", name, raw)
		case size < 64<<20:
			t.Errorf("%s: max_slot_wal_keep_size %q: want a positive limit of at least a few WAL segments", name, raw)
		}
	}
	if compose["max_slot_wal_keep_size"] != stack["max_slot_wal_keep_size"] {
		t.Errorf("max_slot_wal_keep_size: compose %q, the local stack %q", compose["max_slot_wal_keep_size"], stack["max_slot_wal_keep_size"])
	}
}

// Both servers raise max_wal_size above the default (1GB), at which a load
// test forces a checkpoint every few seconds, and keep the same value, so
// the bench's figures from the local stack hold for compose.
func TestCheckpointsAreNotForcedByALoadTest(t *testing.T) {
	t.Parallel()
	compose, stack := composePostgresSettings(t), stackPostgresSettings(t)
	for name, settings := range map[string]map[string]string{"docker-compose.yml": compose, "scripts/stack.sh": stack} {
		raw, ok := settings["max_wal_size"]
		size, valid := walSize(raw)
		switch {
		case !ok:
			t.Errorf("%s: max_wal_size is not set (the default, 1GB, forces a checkpoint every few seconds under load)", name)
		case !valid || size < 2<<30:
			t.Errorf("%s: max_wal_size %q: want at least 2GB", name, raw)
		}
	}
	if compose["max_wal_size"] != stack["max_wal_size"] {
		t.Errorf("max_wal_size: compose %q, the local stack %q", compose["max_wal_size"], stack["max_wal_size"])
	}
}
