package deploycheck

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// loadCompose loads docker-compose.yml with every profile, interpolated
// with env (KEY=VALUE) instead of the environment.
func loadCompose(t *testing.T, env ...string) *types.Project {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{filepath.Join(root, "docker-compose.yml")},
		cli.WithWorkingDirectory(root), cli.WithEnv(env), cli.WithProfiles([]string{"load", "chaos"}))
	if err != nil {
		t.Fatal(err)
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("docker-compose.yml does not load: %v", err)
	}
	return project
}

// binaries maps each binary the Dockerfile builds to its package path.
func binaries(t *testing.T) map[string]string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`\./(cmd|services)/[a-z]+`).FindAllString(string(src), -1) {
		out[filepath.Base(m)] = m
	}
	if len(out) == 0 {
		t.Fatal("the Dockerfile builds no binaries")
	}
	return out
}

// envVars returns every environment variable a binary reads, with its
// default: the `env:"…"` struct tags in its own packages and the module
// packages it imports. required lists those tagged required or notEmpty.
func envVars(t *testing.T, pkg string) (all map[string]string, required map[string]bool) {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f",
		`{{if .Module}}{{if .Module.Main}}{{range .GoFiles}}{{$.Dir}}/{{.}}{{"\n"}}{{end}}{{end}}{{end}}`, pkg)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	all, required = map[string]string{}, map[string]bool{}
	for line := range strings.Lines(string(out)) {
		file := strings.TrimSuffix(line, "\n")
		if file == "" {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			f, ok := n.(*ast.Field)
			if !ok || f.Tag == nil {
				return true
			}
			raw, _ := strconv.Unquote(f.Tag.Value)
			tag := reflect.StructTag(raw)
			name, ok := tag.Lookup("env")
			if !ok {
				return true
			}
			name, opts, _ := strings.Cut(name, ",")
			all[name] = tag.Get("envDefault")
			if strings.Contains(opts, "required") || strings.Contains(opts, "notEmpty") {
				required[name] = true
			}
			return true
		})
	}
	return all, required
}

func TestComposeServices(t *testing.T) {
	t.Parallel()
	project := loadCompose(t)
	want := []string{"postgres", "kafka", "init", "orders", "relay", "ledger", "notifications", "mailpit", "k6", "chaos"}
	for _, name := range want {
		if _, ok := project.Services[name]; !ok {
			t.Errorf("service %s is missing from docker-compose.yml", name)
		}
	}
	if relay := project.Services["relay"]; relay.Deploy == nil || relay.Deploy.Replicas == nil || *relay.Deploy.Replicas < 2 {
		t.Error("relay: want at least 2 replicas (leases are the point)")
	}
	if k6 := project.Services["k6"]; !slices.Contains(k6.Profiles, "load") {
		t.Error("k6 must sit under the load profile")
	}
	if chaos := project.Services["chaos"]; !slices.Contains(chaos.Profiles, "chaos") {
		t.Error("chaos must sit under the chaos profile: docker compose up must not run it")
	}
}

// oneShot tells the jobs that run once and exit (init, the chaos runner)
// from the long-running services.
func oneShot(name string, svc types.ServiceConfig) bool {
	return name == "init" || slices.Contains(svc.Profiles, "chaos")
}

// Every paylab container runs a binary the Dockerfile builds, with a
// subcommand it has, and sets only environment variables that binary reads
// (and every one it requires).
func TestComposeMatchesBinaries(t *testing.T) {
	t.Parallel()
	project := loadCompose(t)
	bins := binaries(t)
	subcommands := map[string][]string{
		"paylab": {"init", "migrate", "topics", "load", "probe", "chaos", "console"},
		"orders": {"relay"},
	}
	checked := 0
	for name, svc := range project.Services {
		if svc.Image != "paylab:local" {
			continue
		}
		checked++
		command := append(slices.Clone(svc.Entrypoint), svc.Command...)
		if len(command) == 0 {
			t.Errorf("%s: no command", name)
			continue
		}
		pkg, ok := bins[command[0]]
		if !ok {
			t.Errorf("%s: command %q is not a binary the Dockerfile builds (%v)", name, command[0], bins)
			continue
		}
		if len(command) > 1 && !slices.Contains(subcommands[command[0]], command[1]) {
			t.Errorf("%s: %s has no subcommand %q", name, command[0], command[1])
		}
		all, required := envVars(t, pkg)
		for key := range svc.Environment {
			if strings.HasPrefix(key, "OTEL_") {
				continue // read by the OpenTelemetry SDK itself (internal/telemetry)
			}
			if _, ok := all[key]; !ok {
				t.Errorf("%s: sets %s, which %s never reads", name, key, pkg)
			}
		}
		for key := range required {
			if _, ok := svc.Environment[key]; !ok {
				t.Errorf("%s: %s requires %s, which compose does not set", name, pkg, key)
			}
		}
		switch {
		case oneShot(name, svc):
			if svc.Restart != "no" {
				t.Errorf("%s: restart %q; a one-shot job must not run again", name, svc.Restart)
			}
		default:
			if svc.Restart != "unless-stopped" && svc.Restart != "always" {
				t.Errorf("%s: restart %q; crashed services must come back", name, svc.Restart)
			}
			if svc.HealthCheck == nil {
				t.Errorf("%s: no healthcheck", name)
			}
		}
	}
	if checked < 5 {
		t.Errorf("only %d paylab containers in docker-compose.yml", checked)
	}
}

// listenPort is the port of the listener address a service sets in key
// (HTTP_ADDR, ADMIN_ADDR); ok is false when it sets none.
func listenPort(svc types.ServiceConfig, key string) (port uint32, ok bool, err error) {
	v := svc.Environment[key]
	if v == nil {
		return 0, false, nil
	}
	_, p, _ := strings.Cut(*v, ":")
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return 0, true, fmt.Errorf("%s=%q has no port", key, *v)
	}
	return uint32(n), true, nil
}

// Listener addresses, published ports and health checks agree.
func TestComposePorts(t *testing.T) {
	t.Parallel()
	project := loadCompose(t)
	for name, svc := range project.Services {
		if svc.Image != "paylab:local" {
			continue
		}
		listens := map[uint32]bool{}
		for _, key := range []string{"HTTP_ADDR", "ADMIN_ADDR"} {
			p, ok, err := listenPort(svc, key)
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			if ok && err == nil {
				listens[p] = true
			}
		}
		for _, p := range svc.Ports {
			if !listens[p.Target] {
				t.Errorf("%s: publishes container port %d, on which nothing listens", name, p.Target)
			}
		}
		if svc.HealthCheck != nil && name != "init" {
			test := strings.Join(svc.HealthCheck.Test, " ")
			admin := svc.Environment["ADMIN_ADDR"]
			if admin == nil || !strings.Contains(test, "127.0.0.1"+*admin) {
				t.Errorf("%s: healthcheck %q does not probe the admin listener %v", name, test, admin)
			}
		}
	}
}
