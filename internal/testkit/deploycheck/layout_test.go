package deploycheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/paylab/paylab/"

// goList is `go list` of args in the checkout, as module-relative paths.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		if rel, ok := strings.CutPrefix(p, module); ok {
			pkgs = append(pkgs, rel)
		}
	}
	return pkgs
}

// internal/ is split by audience: the service binaries link internal/platform
// and never the CLI's machinery (internal/lab) or test helpers
// (internal/testkit); the CLI links no service's code.
func TestBinariesLinkTheirAudienceOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		bin       string
		forbidden []string
	}{
		{"./services/orders", []string{"internal/lab/", "internal/testkit/"}},
		{"./services/ledger", []string{"internal/lab/", "internal/testkit/"}},
		{"./services/notifications", []string{"internal/lab/", "internal/testkit/"}},
		{"./cmd/paylab", []string{"services/", "internal/testkit/"}},
	} {
		for _, dep := range goList(t, "-deps", tc.bin) {
			for _, f := range tc.forbidden {
				if strings.HasPrefix(dep, f) {
					t.Errorf("%s links %s", tc.bin, dep)
				}
			}
		}
	}
	for _, dep := range goList(t, "-deps", "./internal/platform/...") {
		if strings.HasPrefix(dep, "internal/lab/") || strings.HasPrefix(dep, "internal/testkit/") {
			t.Errorf("internal/platform links %s", dep)
		}
	}
}

// The README's layout table names every top-level package: each of pkg/,
// cmd/ and services/, and each package of internal/platform, internal/lab
// and internal/testkit.
func TestReadmeLayoutNamesEveryPackage(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, layout, _ := strings.Cut(string(readme), "\n## Layout\n")
	layout, _, _ = strings.Cut(layout, "\n## ")
	seen := map[string]bool{}
	for _, p := range goList(t, "./...") {
		parts := strings.Split(p, "/")
		depth := 2
		if parts[0] == "internal" {
			depth = 3
		}
		if len(parts) < depth || slices.Contains(parts[:depth], "internal") && parts[0] != "internal" {
			continue
		}
		top := strings.Join(parts[:depth], "/")
		if seen[top] {
			continue
		}
		seen[top] = true
		if !strings.Contains(layout, "| `"+top+"` |") {
			t.Errorf("the README's layout table does not name %s", top)
		}
	}
}
