package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// CPU is the processor time three parties spent on a drain, per event:
// PostgreSQL (every server process, the exited ones included), the Kafka
// broker, and the contender (the relays in this process, or a peer's
// process). They are read from /proc on this machine, so they are only
// there when the servers run here (the local stack, or compose on this
// host).
type CPU struct {
	PostgreSQL float64 `json:"postgresql_us_per_event"`
	Broker     float64 `json:"broker_us_per_event"`
	Contender  float64 `json:"contender_us_per_event"`
}

// cpuSample is the cumulative CPU time of the servers and of this process.
type cpuSample struct {
	postgres, broker, self time.Duration
	backends               map[int]time.Duration // each live server process's own time
	ok                     bool
}

const clockTicks = 100 // USER_HZ, fixed at 100 on Linux

// sampleCPU reads the servers' and this process's CPU time so far.
func sampleCPU() cpuSample {
	s := cpuSample{backends: map[int]time.Duration{}}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		s.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	comms := map[int]string{}
	type proc struct {
		ppid                int
		own, reapedChildren time.Duration
	}
	procs := map[int]proc{}
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || end < open {
			continue
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:open])))
		comm := string(b[open+1 : end])
		f := strings.Fields(string(b[end+1:])) // f[0] is field 3 (state)
		if len(f) < 15 {
			continue
		}
		ticks := func(i int) time.Duration { // field i (1-based, as in proc(5))
			v, _ := strconv.ParseInt(f[i-3], 10, 64)
			return time.Duration(v) * time.Second / clockTicks
		}
		ppid, _ := strconv.Atoi(f[1])
		comms[pid] = comm
		switch {
		case comm == "postgres":
			procs[pid] = proc{ppid: ppid, own: ticks(14) + ticks(15), reapedChildren: ticks(16) + ticks(17)}
		case comm == "java" && isBroker(pid):
			s.broker += ticks(14) + ticks(15)
		}
	}
	for pid, p := range procs {
		s.postgres += p.own
		s.backends[pid] = p.own
		if comms[p.ppid] != "postgres" { // the postmaster: its exited backends are in its children's time
			s.postgres += p.reapedChildren
			s.ok = true
		}
	}
	return s
}

// isBroker reports whether java process pid is a Kafka broker.
func isBroker(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return err == nil && bytes.Contains(b, []byte("kafka.Kafka"))
}

// perEvent is the CPU spent between s and t per event; contender, when
// positive, replaces this process's own time (a peer's process measured
// itself).
func (s cpuSample) perEvent(t cpuSample, events int, contender time.Duration) *CPU {
	if !s.ok || !t.ok || events <= 0 {
		return nil
	}
	if contender <= 0 {
		contender = t.self - s.self
	}
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(events) }
	return &CPU{PostgreSQL: us(t.postgres - s.postgres), Broker: us(t.broker - s.broker), Contender: us(contender)}
}

// PipelineCPU is the processor time S4's parts spent per payment, in µs:
// the orders API and the ledger (their processes), this process (the relay
// and the load generator), PostgreSQL (both databases' server processes)
// and the Kafka broker. Busy is the cores in use meanwhile, all of this
// machine's processes counted.
//
// PostgreSQL is split by who the server worked for: the relay's backends,
// the other backends of the orders database (the API's, the relay's
// listener) and the ledger database's; the rest is its own processes (WAL
// writer, checkpointer, autovacuum) and the backends that exited meanwhile.
type PipelineCPU struct {
	API        float64 `json:"api_us_per_payment"`
	Ledger     float64 `json:"ledger_us_per_payment"`
	Harness    float64 `json:"relay_and_load_us_per_payment"`
	PostgreSQL float64 `json:"postgresql_us_per_payment"`
	OrdersDB   float64 `json:"orders_db_backends_us_per_payment"` // the API's and its listener's
	RelayDB    float64 `json:"relay_backends_us_per_payment"`
	LedgerDB   float64 `json:"ledger_db_backends_us_per_payment"`
	Broker     float64 `json:"broker_us_per_payment"`
	Busy       float64 `json:"cores_busy"`
}

// Total is the parts' sum.
func (c PipelineCPU) Total() float64 { return c.API + c.Ledger + c.Harness + c.PostgreSQL + c.Broker }

// pipelineSample is cpuSample plus the API's and the ledger's processes and
// the whole machine's busy time.
type pipelineSample struct {
	cpuSample
	api, ledger, machine time.Duration
	at                   time.Time
}

// dbBackends maps server process ids to the database they serve, or to
// relaySessionName for the bench's relays' sessions, from pg_stat_activity
// as conn's role sees it.
func dbBackends(ctx context.Context, conn *pgx.Conn) (map[int]string, error) {
	rows, err := conn.Query(ctx, `SELECT pid, CASE application_name WHEN $1 THEN $1 ELSE datname END
		FROM pg_stat_activity WHERE datname IS NOT NULL`, relaySessionName)
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	var (
		pid  int32
		name string
	)
	_, err = pgx.ForEachRow(rows, []any{&pid, &name}, func() error { out[int(pid)] = name; return nil })
	return out, err
}

// dbTime is the CPU time the processes of db (by), alive at both samples,
// spent between s and t.
func (s cpuSample) dbTime(t cpuSample, by map[int]string, db string) time.Duration {
	var d time.Duration
	for pid, name := range by {
		if name != db {
			continue
		}
		if after, ok := t.backends[pid]; ok {
			d += after - s.backends[pid]
		}
	}
	return d
}

func samplePipeline(api, ledger int) pipelineSample {
	s := pipelineSample{cpuSample: sampleCPU(), machine: machineBusy(), at: time.Now()}
	var err1, err2 error
	s.api, err1 = processCPU(api)
	s.ledger, err2 = processCPU(ledger)
	s.ok = s.ok && err1 == nil && err2 == nil
	return s
}

// perPayment is the CPU spent between s and t per payment, PostgreSQL's
// split by by (dbBackends: the server's processes to the databases they
// serve, ordersDB and ledgerDB, or to the relays); nil when the servers'
// processes could not be read.
func (s pipelineSample) perPayment(t pipelineSample, payments int, by map[int]string, ordersDB, ledgerDB string) *PipelineCPU {
	if !s.ok || !t.ok || payments <= 0 {
		return nil
	}
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(payments) }
	return &PipelineCPU{
		API: us(t.api - s.api), Ledger: us(t.ledger - s.ledger), Harness: us(t.self - s.self),
		PostgreSQL: us(t.postgres - s.postgres), Broker: us(t.broker - s.broker),
		OrdersDB: us(s.dbTime(t.cpuSample, by, ordersDB)), LedgerDB: us(s.dbTime(t.cpuSample, by, ledgerDB)),
		RelayDB: us(s.dbTime(t.cpuSample, by, relaySessionName)),
		Busy:    (t.machine - s.machine).Seconds() / t.at.Sub(s.at).Seconds(),
	}
}

// machineBusy is the time all cores spent not idle so far (/proc/stat).
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	var busy int64
	for i := 1; i < len(f) && i <= 8; i++ {
		if i == 4 || i == 5 { // idle, iowait
			continue
		}
		v, _ := strconv.ParseInt(f[i], 10, 64)
		busy += v
	}
	return time.Duration(busy) * time.Second / clockTicks
}
