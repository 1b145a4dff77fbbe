package deploycheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// libraries are the modules of their own that other systems adopt.
var libraries = []string{"pkg/outbox", "pkg/inbox"}

// paylabOnly are modules of paylab's that an adopter of the libraries must
// not get: the CLI's, the console's and the services'.
var paylabOnly = []string{
	"github.com/chromedp/", "gonum.org/", "github.com/getkin/kin-openapi", "github.com/yuin/goldmark",
	"github.com/pressly/goose", "github.com/caarlos0/env",
}

// goListIn is `go list args` in the module at dir (relative to the
// checkout), on that module's own go.mod (no workspace).
func goListIn(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = filepath.Join(root, dir)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v in %s: %v", args, dir, err)
	}
	return strings.Fields(string(out))
}

// pkg/outbox and pkg/inbox are modules of their own, meant to be added to
// other systems: each builds and tests on its own go.mod, and imports
// nothing of paylab's but its own packages — its tests included.
func TestReusablePackagesStandAlone(t *testing.T) {
	t.Parallel()
	for _, lib := range libraries {
		module := "github.com/paylab/paylab/" + lib
		if got := goListIn(t, lib, "-m"); len(got) != 1 || got[0] != module {
			t.Errorf("%s is module %v, want %s", lib, got, module)
		}
		for _, dep := range goListIn(t, lib, "-deps", "-test", "./...") {
			if strings.HasPrefix(dep, "github.com/paylab/paylab/") && !strings.HasPrefix(dep, module) {
				t.Errorf("%s imports %s; it must stand alone", lib, dep)
			}
		}
	}
}

// examples/shop adopts the libraries as a stranger would: it requires them
// and nothing of paylab's, so none of paylab's own dependencies reach it
// (`go list -m all` there lists the libraries' dependencies only).
func TestExampleRequiresOnlyTheLibraries(t *testing.T) {
	t.Parallel()
	const dir = "examples/shop"
	for _, m := range goListIn(t, dir, "-deps", "-test", "-f", "{{with .Module}}{{.Path}}{{end}}", "./...") {
		if m == "github.com/paylab/paylab" {
			t.Errorf("%s links paylab's module", dir)
		}
		for _, p := range paylabOnly {
			if strings.HasPrefix(m, p) {
				t.Errorf("%s links %s, a dependency of paylab's, not of the libraries", dir, m)
			}
		}
	}
	gomod, err := os.ReadFile(filepath.Join(root, dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) > 0 && (f[0] == "github.com/paylab/paylab" || len(f) > 1 && f[1] == "github.com/paylab/paylab") {
			t.Errorf("%s/go.mod names paylab's module: %q", dir, line)
		}
	}
}
