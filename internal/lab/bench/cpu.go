package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
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
	ok                     bool
}

const clockTicks = 100 // USER_HZ, fixed at 100 on Linux

// sampleCPU reads the servers' and this process's CPU time so far.
func sampleCPU() cpuSample {
	var s cpuSample
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
	for _, p := range procs {
		s.postgres += p.own
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
