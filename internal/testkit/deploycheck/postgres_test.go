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

// sameSizeInBoth checks that compose's and the local stack's servers both
// set the size setting name, to at least least bytes (unset, it takes the
// default: why says what that does), and to the same value, so what the
// local stack shows holds for compose.
func sameSizeInBoth(t *testing.T, compose, stack map[string]string, name string, least int64, why string) {
	t.Helper()
	for file, settings := range map[string]map[string]string{"docker-compose.yml": compose, "scripts/stack.sh": stack} {
		raw, ok := settings[name]
		size, valid := walSize(raw)
		switch {
		case !ok:
			t.Errorf("%s: %s is not set (%s)", file, name, why)
		case !valid:
			t.Errorf("%s: %s %q is not a size", file, name, raw)
		case size < least:
			t.Errorf("%s: %s %q: want at least %d MB", file, name, raw, least>>20)
		}
	}
	if compose[name] != stack[name] {
		t.Errorf("%s: compose %q, the local stack %q", name, compose[name], stack[name])
	}
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
	}
	sameSizeInBoth(t, compose, stack, "max_slot_wal_keep_size", 64<<20, "the default, -1, lets a slot keep all WAL")
}

// Both servers raise max_wal_size above the default (1GB), at which a load
// test forces a checkpoint every few seconds, and keep the same value, so
// the bench's figures from the local stack hold for compose.
func TestCheckpointsAreNotForcedByALoadTest(t *testing.T) {
	t.Parallel()
	sameSizeInBoth(t, composePostgresSettings(t), stackPostgresSettings(t), "max_wal_size", 2<<30,
		"the default, 1GB, forces a checkpoint every few seconds under load")
}
