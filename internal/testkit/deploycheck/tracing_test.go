package deploycheck

import (
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Every long-running paylab container exports its traces to Jaeger's
// OTLP/HTTP port under a service name of its own, and runs a binary that
// sets tracing up (internal/telemetry reads the OTEL_* variables).
func TestComposeExportsTracesToJaeger(t *testing.T) {
	t.Parallel()
	project := loadCompose(t)
	bins := binaries(t)
	jaeger, ok := project.Services["jaeger"]
	if !ok {
		t.Fatal("no jaeger service")
	}
	otlpPort := ""
	for _, p := range jaeger.Ports {
		if p.Target == 4318 {
			otlpPort = "4318"
		}
	}
	if otlpPort == "" {
		t.Error("jaeger does not publish its OTLP/HTTP port 4318")
	}
	names := map[string]string{}
	checked := 0
	for name, svc := range project.Services {
		if svc.Image != "paylab:local" || svc.Restart == "no" { // one-shot jobs: init, chaos
			continue
		}
		if name == "console" { // a lab tool watching the flow, no step of it
			continue
		}
		checked++
		endpoint, serviceName := svc.Environment["OTEL_EXPORTER_OTLP_ENDPOINT"], svc.Environment["OTEL_SERVICE_NAME"]
		if endpoint == nil {
			t.Errorf("%s: OTEL_EXPORTER_OTLP_ENDPOINT is not set", name)
		} else if u, err := url.Parse(*endpoint); err != nil || u.Scheme != "http" || u.Hostname() != "jaeger" || u.Port() != "4318" {
			t.Errorf("%s: OTEL_EXPORTER_OTLP_ENDPOINT=%s, want Jaeger's OTLP/HTTP port http://jaeger:4318", name, *endpoint)
		}
		if serviceName == nil || *serviceName == "" {
			t.Errorf("%s: OTEL_SERVICE_NAME is not set", name)
		} else if other, dup := names[*serviceName]; dup {
			t.Errorf("%s and %s both export as %s", name, other, *serviceName)
		} else {
			names[*serviceName] = name
		}
		pkg := bins[svc.Command[0]]
		cmd := exec.Command("go", "list", "-deps", pkg)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		if !slices.Contains(strings.Fields(string(out)), "github.com/paylab/paylab/internal/platform/telemetry") {
			t.Errorf("%s: %s does not set up tracing (internal/telemetry)", name, pkg)
		}
	}
	if checked < 4 {
		t.Errorf("only %d long-running paylab containers", checked)
	}
}
