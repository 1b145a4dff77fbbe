package paymenttrace_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// raceEnabled is set when the test binary is built with -race; the service
// binaries are built the same way, so their packages come from the cache.
var raceEnabled bool

// buildServices builds the ledger and notifications binaries into a
// temporary folder and returns it.
func buildServices(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./services/ledger", "./services/notifications")...)
	cmd.Dir = filepath.Join("..", "..", "..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the services: %v\n%s", err, out)
	}
	return dir
}

// service is a service process started for the test.
type service struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
}

func (s *service) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.Write(p)
}

// startService runs bin with env added to this process's environment. At
// cleanup it is stopped with SIGTERM (so it flushes its spans) and its
// output is logged if the test failed.
func startService(t *testing.T, name, bin string, env ...string) {
	t.Helper()
	s := &service{name: name, cmd: exec.Command(bin)}
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Stdout, s.cmd.Stderr = s, s
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = s.cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			s.mu.Lock()
			t.Logf("%s output:\n%s", name, s.out.String())
			s.mu.Unlock()
		}
	})
}
