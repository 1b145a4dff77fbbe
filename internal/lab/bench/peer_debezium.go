package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/paylab/paylab/pkg/outbox"
)

// The Debezium contender of the peer benchmark: what a user who picks
// Debezium instead of paylab runs. The application writes its events with
// plain INSERTs into the outbox table Debezium's outbox documentation
// prescribes; Debezium's embedded engine streams them from a logical
// replication slot (PostgreSQL connector, pgoutput), its outbox EventRouter
// turns each row into a Kafka record (key = aggregate id, value = payload,
// the header columns as headers), and a plain KafkaProducer (acks=all,
// idempotent) sends each batch, whose offsets are committed only once every
// record of it is acknowledged. The Java side is the Maven project in
// internal/lab/peers/debezium.

const (
	debeziumProject = "internal/lab/peers/debezium"
	debeziumJar     = "paylab-debezium-peer.jar"
	debeziumTable   = "debezium_outbox"
	debeziumSource  = "/paylab/orders" // the CloudEvents source paylab's relays set
)

// debeziumOutboxDDL is the outbox table of Debezium's documentation (id,
// aggregatetype, aggregateid, type, payload: the EventRouter's default
// columns) with one text column per header paylab's KafkaPublisher sets.
// payload is jsonb, as in paylab's outbox: logical decoding hands the
// router jsonb's text, which it passes through as the record's value, the
// same bytes paylab's relay reads and sends.
const debeziumOutboxDDL = `CREATE TABLE ` + debeziumTable + ` (
	id               uuid  PRIMARY KEY,
	aggregatetype    text  NOT NULL,
	aggregateid      text  NOT NULL,
	type             text  NOT NULL,
	payload          jsonb NOT NULL,
	ce_specversion   text  NOT NULL,
	ce_id            text  NOT NULL,
	ce_source        text  NOT NULL,
	ce_type          text  NOT NULL,
	ce_time          text  NOT NULL,
	ce_subject       text  NOT NULL,
	ce_sequence      text  NOT NULL,
	ce_schemaversion text  NOT NULL,
	ce_aggregatetype text  NOT NULL,
	content_type     text  NOT NULL,
	traceparent      text  NOT NULL
)`

// debeziumHeaders are the Kafka headers the router makes of the header
// columns (Main.DEFAULT_HEADERS on the Java side): the 11 of
// outbox.Event.ProducerMessage for an OrderCaptured event.
var debeziumHeaders = []string{
	outbox.HeaderSpecVersion, outbox.HeaderID, outbox.HeaderSource, outbox.HeaderType, outbox.HeaderTime,
	outbox.HeaderSubject, outbox.HeaderSequence, outbox.HeaderSchemaVersion, outbox.HeaderAggregateType,
	outbox.HeaderContentType, "traceparent",
}

// buildDebeziumPeer builds the Debezium peer's runnable jar with Maven from
// the project in repo and returns its path. The build goes to
// outDir/debezium-peer, or to the project's target/ when outDir is empty; a
// build newer than the project's sources is reused without running Maven.
// The first build resolves the dependencies from Maven Central into the
// local Maven repository; later ones need no network.
func buildDebeziumPeer(ctx context.Context, repo, outDir string) (string, error) {
	project := filepath.Join(repo, filepath.FromSlash(debeziumProject))
	build := filepath.Join(project, "target")
	if outDir != "" {
		var err error
		if build, err = filepath.Abs(filepath.Join(outDir, "debezium-peer")); err != nil {
			return "", err
		}
	}
	jar := filepath.Join(build, debeziumJar)
	stamp := filepath.Join(build, ".built")
	fresh, err := builtAfter(stamp, filepath.Join(project, "pom.xml"), filepath.Join(project, "src"))
	if err != nil {
		return "", err
	}
	if fresh {
		if _, err := os.Stat(jar); err == nil {
			return jar, nil
		}
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		return "", fmt.Errorf("building the Debezium peer needs Maven (mvn) and a JDK 17: %w", err)
	}
	cmd := exec.CommandContext(ctx, "mvn", "-B", "-q", "package", "-Dpeer.build="+build)
	cmd.Dir = project
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("mvn package in %s: %w\n%s", project, err, tail(out, 40))
	}
	if _, err := os.Stat(jar); err != nil {
		return "", fmt.Errorf("mvn package in %s built no %s: %w", project, debeziumJar, err)
	}
	return jar, os.WriteFile(stamp, nil, 0o644)
}

// builtAfter reports whether stamp exists and is newer than every file of
// the sources (files or folders).
func builtAfter(stamp string, sources ...string) (bool, error) {
	st, err := os.Stat(stamp)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	built := st.ModTime()
	newer := errors.New("newer")
	for _, src := range sources {
		err := filepath.WalkDir(src, func(_ string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			if !info.ModTime().Before(built) {
				return newer
			}
			return nil
		})
		if errors.Is(err, newer) {
			return false, nil
		} else if err != nil {
			return false, err
		}
	}
	return true, nil
}

// tail is the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// debeziumDrain is the Debezium peer's S2: in a fresh database, the outbox
// table and the replication slot (created by the peer's init: a first short
// start of the connector), then a backlog of n events written in txs
// transactions of equal size (to one event), then a fresh JVM drains it to
// a fresh topic.
// The peer's clock runs from the engine's start to the nth acknowledgement;
// PeerCPUSeconds is the JVM's CPU time over the same span. The slot is
// dropped at the end, whatever happened (a leftover slot pins WAL forever).
func (e *env) debeziumDrain(ctx context.Context, jar string, n, txs int) (res DrainResult, err error) {
	res = DrainResult{Relays: 1, Events: n}
	if n < 1 || txs < 1 || txs > n {
		return res, fmt.Errorf("debezium drain: %d events in %d transactions", n, txs)
	}
	// Each call of a run (the bench alternates contenders over rounds) has
	// its own database, topic, slot and logs.
	e.mu.Lock()
	stage := fmt.Sprintf("pdbz%d", len(e.slots)+1)
	slot := fmt.Sprintf("paylab_bench_%s_%s", e.run, stage)
	e.slots = append(e.slots, slot)
	e.mu.Unlock()
	dbURL, topic, err := e.databaseAndTopic(ctx, stage)
	if err != nil {
		return res, err
	}
	db, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return res, err
	}
	// The bench's role is otherwise unprivileged: reading a replication slot
	// takes the REPLICATION attribute (the role owns the database, so it may
	// create the table's publication). The role goes at e.close.
	if err := withConn(ctx, e.cfg.AdminURL, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, "ALTER ROLE "+pgx.Identifier{e.role}.Sanitize()+" REPLICATION")
		return err
	}); err != nil {
		return res, fmt.Errorf("granting REPLICATION to %s: %w", e.role, err)
	}
	if err := withConn(ctx, dbURL, func(c *pgx.Conn) error { _, err := c.Exec(ctx, debeziumOutboxDDL); return err }); err != nil {
		return res, fmt.Errorf("creating %s: %w", debeziumTable, err)
	}

	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := withConn(cctx, e.cfg.AdminURL, func(c *pgx.Conn) error { return dropSlot(cctx, c, slot) }); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	offsets, err := os.MkdirTemp("", "paylab-debezium-offsets-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(offsets)
	flags := []string{
		"--host", db.Host, "--port", strconv.Itoa(int(db.Port)), "--database", db.Database,
		"--user", db.User, "--password", db.Password,
		"--slot", slot, "--publication", "paylab_bench_" + stage, "--table", debeziumTable, "--offsets-dir", offsets,
	}

	var created struct {
		Slot string `json:"slot"`
	}
	if err := e.runDebezium(ctx, jar, stage, "init", flags, &created); err != nil {
		return res, err
	}
	if created.Slot != slot {
		return res, fmt.Errorf("debezium init: created slot %q, want %q", created.Slot, slot)
	}
	if err := withConn(ctx, dbURL, func(c *pgx.Conn) error { return seedDebeziumOutbox(ctx, c, n, txs) }); err != nil {
		return res, err
	}
	if err := e.checkpoint(ctx); err != nil {
		return res, err
	}

	var drained struct {
		Events        int     `json:"events"`
		Seconds       float64 `json:"seconds"`
		PerSecond     float64 `json:"per_second"`
		JVMCPUSeconds float64 `json:"jvm_cpu_seconds"`
	}
	cpu := sampleCPU() // the servers' over the JVM's whole run; the JVM's own over its drain
	if err := e.runDebezium(ctx, jar, stage, "drain", append(flags, "--topic", topic,
		"--brokers", strings.Join(e.cfg.Brokers, ","), "--events", strconv.Itoa(n)), &drained); err != nil {
		return res, err
	}
	if drained.Events < n || drained.Seconds <= 0 {
		return res, fmt.Errorf("debezium drain: %d of %d events in %.3f s", drained.Events, n, drained.Seconds)
	}
	res.Seconds, res.PerSecond, res.PeerCPUSeconds = drained.Seconds, drained.PerSecond, drained.JVMCPUSeconds
	res.CPU = cpu.perEvent(sampleCPU(), n, max(time.Duration(drained.JVMCPUSeconds*float64(time.Second)), time.Nanosecond))
	return res, nil
}

// seedDebeziumOutbox writes n OrderCaptured events into the Debezium outbox
// in txs transactions (their sizes differ by one at most), each one INSERT …
// SELECT on the server, as seedOutbox does paylab's: the same payloads, and
// the header values paylab's KafkaPublisher would set for them (ce_time as
// Go's RFC 3339 with nanoseconds, trailing zeros cut). It then vacuums and
// analyzes the table, so autovacuum does not run during the drain.
func seedDebeziumOutbox(ctx context.Context, conn *pgx.Conn, n, txs int) error {
	for i := range txs {
		size := n / txs
		if i < n%txs {
			size++
		}
		sql := `INSERT INTO ` + debeziumTable + ` (id, aggregatetype, aggregateid, type, payload,
	ce_specversion, ce_id, ce_source, ce_type, ce_time, ce_subject, ce_sequence, ce_schemaversion,
	ce_aggregatetype, content_type, traceparent)
SELECT event_id, 'order', order_id, 'OrderCaptured', payload,
	$1, event_id::text, $2, 'OrderCaptured',
	regexp_replace(to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '\.?0+$', '') || 'Z',
	order_id, '1', '1', 'order', $3, headers->>'traceparent'
FROM (` + seedRows(newTag(), size, false) + `) AS rows`
		if _, err := conn.Exec(ctx, sql, outbox.SpecVersion, debeziumSource, outbox.ContentTypeJSON); err != nil {
			return fmt.Errorf("seeding %d rows of %s (transaction %d of %d): %w", size, debeziumTable, i+1, txs, err)
		}
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE "+debeziumTable); err != nil {
		return fmt.Errorf("vacuuming %s: %w", debeziumTable, err)
	}
	return nil
}

// runDebezium runs the peer's mode in a fresh JVM, its log in the run's log
// folder, and decodes the JSON object it prints last into out.
func (e *env) runDebezium(ctx context.Context, jar, stage, mode string, flags []string, out any) error {
	log, err := e.logFile(stage + "-debezium-" + mode)
	if err != nil {
		return err
	}
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, "java", append([]string{"-jar", jar, mode}, flags...)...)
	cmd.Stdout, cmd.Stderr = &stdout, log
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		logged, _ := os.ReadFile(log.Name())
		return fmt.Errorf("debezium %s: %w; the end of its log %s:\n%s", mode, err, log.Name(), tail(logged, 30))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	fmt.Fprintf(log, "debezium %s: %s\n", mode, lines[len(lines)-1])
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), out); err != nil {
		return fmt.Errorf("debezium %s printed %q: %w", mode, stdout.String(), err)
	}
	return nil
}

// dropSlot drops a replication slot if it exists, ending first the
// walsender that may still stream from it (a peer that did not stop).
func dropSlot(ctx context.Context, conn *pgx.Conn, slot string) error {
	for {
		_, err := conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots
			WHERE slot_name = $1 AND active_pid IS NOT NULL`, slot)
		if err == nil {
			_, err = conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot)
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55006" { // object_in_use: the walsender is still exiting
			if err != nil {
				return fmt.Errorf("dropping replication slot %s: %w", slot, err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dropping replication slot %s: %w", slot, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// dropSlots drops the replication slots of the run that still exist: those
// of a peer that died, or hung, before its drain could drop them.
func (e *env) dropSlots(ctx context.Context) error {
	e.mu.Lock()
	slots := append([]string(nil), e.slots...)
	e.mu.Unlock()
	return e.dropEach(ctx, slots, dropSlot)
}
