package deploycheck

import (
	"os/exec"
	"strings"
	"testing"
)

// pkg/outbox and pkg/inbox are meant to be copied into other systems: they
// import nothing of paylab's but their own sub-packages.
func TestReusablePackagesStandAlone(t *testing.T) {
	t.Parallel()
	for _, pkg := range []string{"pkg/outbox", "pkg/inbox"} {
		cmd := exec.Command("go", "list", "-deps", "./"+pkg)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "github.com/paylab/paylab/") && !strings.HasPrefix(dep, "github.com/paylab/paylab/"+pkg) {
				t.Errorf("%s imports %s; it must stand alone", pkg, dep)
			}
		}
	}
}
