package testenv

import (
	"os/exec"
	"testing"
)

// BuildServices builds the orders, ledger and notifications binaries into a
// folder of the test's own and returns it, for tests that run them as
// processes (the chaos runner's local target, the console).
func BuildServices(t testing.TB) string {
	t.Helper()
	bin := t.TempDir()
	cmd := exec.Command("go", "build", "-o", bin+"/", "github.com/paylab/paylab/services/orders",
		"github.com/paylab/paylab/services/ledger", "github.com/paylab/paylab/services/notifications")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the services: %v\n%s", err, out)
	}
	return bin
}
