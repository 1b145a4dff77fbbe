package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/paylab/paylab/internal/lab/localstack"
)

// Machine is where a run ran: the figures mean little without it.
type Machine struct {
	Cores             int     `json:"cores"`
	CPU               string  `json:"cpu"`
	MemoryGB          float64 `json:"memory_gb"`
	OS                string  `json:"os"`
	Go                string  `json:"go"`
	PostgreSQL        string  `json:"postgresql"`
	SynchronousCommit string  `json:"synchronous_commit"`
	Kafka             string  `json:"kafka"`
	LoadStart         float64 `json:"load_average_start"` // 1-minute load average
	LoadEnd           float64 `json:"load_average_end"`
}

// String is the machine in one line.
func (m Machine) String() string {
	return fmt.Sprintf("%d cores (%s), %.0f GB, %s; Go %s; PostgreSQL %s (synchronous_commit=%s); %s; load average %.1f at start, %.1f at end",
		m.Cores, m.CPU, m.MemoryGB, m.OS, strings.TrimPrefix(m.Go, "go"), m.PostgreSQL, m.SynchronousCommit, m.Kafka, m.LoadStart, m.LoadEnd)
}

// machine describes this machine and the servers at dbURL and the brokers.
func machine(ctx context.Context, dbURL string) (Machine, error) {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version(), OS: osName(), CPU: "unknown", Kafka: kafkaVersion()}
	if v := procField("/proc/cpuinfo", "model name"); v != "" {
		m.CPU = v
	}
	if kb, err := strconv.ParseFloat(strings.Fields(procField("/proc/meminfo", "MemTotal") + " 0")[0], 64); err == nil {
		m.MemoryGB = kb / (1 << 20)
	}
	m.LoadStart = loadAverage()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return m, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	err = conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('synchronous_commit')`).
		Scan(&m.PostgreSQL, &m.SynchronousCommit)
	return m, err
}

// procField reads "key : value" from a /proc file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(b) + " 0")[0], 64)
	return f
}

func osName() string {
	name := runtime.GOOS
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				name = strings.Trim(v, `"`)
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		name += ", Linux " + strings.TrimSpace(string(b))
	}
	return name
}

var kafkaVersionRE = regexp.MustCompile(`Apache Kafka [^ ,)]+`)

// kafkaVersion asks the local stack's script, which reads the broker's own
// log; a broker from elsewhere (KAFKA_BROKERS) has no version to report.
func kafkaVersion() string {
	root, err := localstack.RepoRoot()
	if err != nil {
		return "Kafka (version not known: " + err.Error() + ")"
	}
	out, err := exec.Command(filepath.Join(root, "scripts", "stack.sh"), "status", "kafka").Output()
	if v := kafkaVersionRE.FindString(string(out)); err == nil && v != "" {
		return v
	}
	return "Kafka (version not known: not the local stack's broker)"
}
