package deploycheck

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// The alert rules are valid and behave as their unit tests say (promtool,
// from the Debian prometheus package).
func TestPrometheusAlertRules(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is needed for the alert rule tests (apt-get install prometheus)")
	}
	dir := filepath.Join(root, "deploy", "prometheus")
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"test", "rules", "alerts_test.yml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}
