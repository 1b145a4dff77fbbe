package deploycheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every setting .env.example documents is read by a binary, read by the
// OpenTelemetry SDK the binaries set up (OTEL_*), or interpolated by docker
// compose (docker-compose.yml or an override, compose.*.yml).
func TestDotEnvExampleNamesRealSettings(t *testing.T) {
	t.Parallel()
	example, err := os.ReadFile(filepath.Join(root, ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	overrides, err := filepath.Glob(filepath.Join(root, "compose.*.yml"))
	if err != nil || len(overrides) < 2 {
		t.Fatalf("the compose overrides: %v, %v", overrides, err)
	}
	known := map[string]bool{}
	for _, file := range append([]string{filepath.Join(root, "docker-compose.yml")}, overrides...) {
		compose, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`\$\{([A-Z0-9_]+)`).FindAllSubmatch(compose, -1) {
			known[string(m[1])] = true
		}
	}
	for _, pkg := range binaries(t) {
		all, _ := envVars(t, pkg)
		for name := range all {
			known[name] = true
		}
	}
	names := regexp.MustCompile(`(?m)^# ([A-Z][A-Z0-9_]+)=`).FindAllSubmatch(example, -1)
	if len(names) < 10 {
		t.Fatalf("only %d settings found in .env.example", len(names))
	}
	for _, m := range names {
		if name := string(m[1]); !known[name] && !strings.HasPrefix(name, "OTEL_") {
			t.Errorf(".env.example documents %s, which nothing reads", m[1])
		}
	}
}
