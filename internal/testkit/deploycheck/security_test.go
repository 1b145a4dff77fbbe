package deploycheck

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/paylab/paylab/internal/platform/migrate"
)

// knownToken is the chaos token an earlier compose file and .env.example
// published: anyone could use it, so nothing may offer it as a default.
const knownToken = "change-me-chaos-token"

// loadEveryProfile loads docker-compose.yml with every profile and the
// overrides (compose.cluster.yml, compose.ha.yml): every service there is,
// interpolated with env (KEY=VALUE) instead of the environment.
func loadEveryProfile(t *testing.T, env ...string) *types.Project {
	t.Helper()
	return loadOverrides(t, []string{clusterFile, haFile}, env...)
}

func readFile(t *testing.T, parts ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{root}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every port the deployment publishes, in every profile, is on the host's
// loopback only: nothing of it — the admin listeners with their chaos
// controls, PostgreSQL, Kafka's plaintext listener, Grafana — is reachable
// from another machine.
func TestComposePublishesOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	project := loadEveryProfile(t)
	published := 0
	for name, svc := range project.Services {
		if svc.NetworkMode == "host" {
			t.Errorf("%s: network_mode host listens on every interface of the host", name)
		}
		for _, p := range svc.Ports {
			published++
			if p.HostIP != "127.0.0.1" {
				t.Errorf("%s publishes container port %d on %q:%s; want \"127.0.0.1:%s:%d\"", name, p.Target, p.HostIP, p.Published, p.Published, p.Target)
			}
		}
	}
	if published < 15 {
		t.Errorf("only %d published ports found", published)
	}
}

// With no .env the chaos controls are off in every paylab process (what
// compose sets, or else the binary's own default) and there is no token;
// .env turns them on, with its own token, for every process and for the
// runners that drive them (the chaos service, k6's chaos script).
func TestComposeChaosOffByDefault(t *testing.T) {
	t.Parallel()
	bins := binaries(t)
	project := loadEveryProfile(t)
	controlled := 0
	for name, svc := range project.Services {
		if tok, ok := svc.Environment["CHAOS_TOKEN"]; ok && deref(tok) != "" {
			t.Errorf("%s: CHAOS_TOKEN defaults to %q; without .env there must be none", name, deref(tok))
		}
		if svc.Image != "paylab:local" {
			continue
		}
		command := append(slices.Clone(svc.Entrypoint), svc.Command...)
		all, _ := envVars(t, bins[command[0]])
		def, reads := all["CHAOS_ENABLED"]
		if !reads {
			continue
		}
		controlled++
		enabled := def
		if v, ok := svc.Environment["CHAOS_ENABLED"]; ok {
			enabled = deref(v)
		}
		if enabled != "false" && enabled != "" {
			t.Errorf("%s: CHAOS_ENABLED=%q without .env; want the chaos controls off", name, enabled)
		}
	}
	if controlled < 4 {
		t.Errorf("only %d services read CHAOS_ENABLED; want orders, relay, ledger, notifications", controlled)
	}

	const tok = "a-token-of-my-own-0123"
	on := loadEveryProfile(t, "CHAOS_ENABLED=true", "CHAOS_TOKEN="+tok)
	for _, name := range []string{"orders", "relay", "ledger", "notifications"} {
		if svc := on.Services[name]; env(svc, "CHAOS_ENABLED") != "true" || env(svc, "CHAOS_TOKEN") != tok {
			t.Errorf("%s: with CHAOS_ENABLED=true and CHAOS_TOKEN in .env it runs CHAOS_ENABLED=%q CHAOS_TOKEN=%q",
				name, env(svc, "CHAOS_ENABLED"), env(svc, "CHAOS_TOKEN"))
		}
	}
	for _, name := range []string{"chaos", "k6"} {
		if got := env(on.Services[name], "CHAOS_TOKEN"); got != tok {
			t.Errorf("%s: CHAOS_TOKEN %q, want .env's", name, got)
		}
	}
}

// The token every reader of the repository knows is offered nowhere: not
// as a default of the compose file, nor in .env.example, the README or the
// chapters that show the chaos controls.
func TestNoKnownChaosToken(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"docker-compose.yml", ".env.example", "README.md", "docs/chaos.md", "docs/console.md", "docs/operations.md", "k6/chaos.js", "scripts/compose-check.sh"} {
		if strings.Contains(readFile(t, file), knownToken) {
			t.Errorf("%s contains %s", file, knownToken)
		}
	}
	compose := readFile(t, "docker-compose.yml")
	for _, m := range regexp.MustCompile(`\$\{CHAOS_TOKEN(:?[-?+=])?([^}]*)\}`).FindAllStringSubmatch(compose, -1) {
		if m[1] != "" && m[1] != ":-" && m[1] != "-" || m[2] != "" {
			t.Errorf("docker-compose.yml: %s gives CHAOS_TOKEN a value of its own", m[0])
		}
	}
	if m := regexp.MustCompile(`(?m)^#? ?CHAOS_TOKEN=(\S*)`).FindStringSubmatch(readFile(t, ".env.example")); m == nil || m[1] != "" {
		t.Errorf(".env.example: %q; want CHAOS_TOKEN documented with no value to copy", m)
	}
}

// Grafana lets visitors view, never administer: anonymous access, when on,
// has the Viewer role; the admin's password comes from .env, with a
// development-only default; no role setting grants more; provisioned data
// sources cannot be edited in the UI.
func TestGrafanaHasNoAnonymousAdmin(t *testing.T) {
	t.Parallel()
	g := loadCompose(t).Services["grafana"]
	if strings.EqualFold(env(g, "GF_AUTH_ANONYMOUS_ENABLED"), "true") && !strings.EqualFold(env(g, "GF_AUTH_ANONYMOUS_ORG_ROLE"), "Viewer") {
		t.Errorf("anonymous visitors get the role %q; want Viewer", env(g, "GF_AUTH_ANONYMOUS_ORG_ROLE"))
	}
	for key, v := range g.Environment {
		if strings.HasSuffix(key, "_ROLE") && (strings.EqualFold(deref(v), "Admin") || strings.EqualFold(deref(v), "Editor")) {
			t.Errorf("%s=%s", key, deref(v))
		}
	}
	if pw := env(g, "GF_SECURITY_ADMIN_PASSWORD"); !strings.HasPrefix(pw, "dev-only-") {
		t.Errorf("GF_SECURITY_ADMIN_PASSWORD defaults to %q; want a dev-only- password (Grafana's own is admin)", pw)
	}
	if pw := env(loadCompose(t, "GRAFANA_ADMIN_PASSWORD=mine").Services["grafana"], "GF_SECURITY_ADMIN_PASSWORD"); pw != "mine" {
		t.Errorf("GRAFANA_ADMIN_PASSWORD in .env gives Grafana the password %q", pw)
	}
	// Each provisioned data source (a list item under datasources:) says
	// editable: false.
	ds := readFile(t, "deploy", "grafana", "provisioning", "datasources", "prometheus.yml")
	items := regexp.MustCompile(`(?m)^\s*- name:`).FindAllString(ds, -1)
	locked := regexp.MustCompile(`(?m)^\s+editable:\s*false\s*$`).FindAllString(ds, -1)
	if len(items) == 0 || len(locked) != len(items) || regexp.MustCompile(`(?m)^\s+editable:\s*true`).MatchString(ds) {
		t.Errorf("%d provisioned data sources, %d of them editable: false", len(items), len(locked))
	}
}

// Every password docker-compose.yml interpolates comes from .env, is
// documented in .env.example, has one default wherever it is used, and that
// default is for development only: "dev-only-…", or a database role's
// development password, which the local stack and the host-side tools
// (paylab verify, paylab chaos run --target compose) share.
func TestComposePasswordsAreDevelopmentDefaults(t *testing.T) {
	t.Parallel()
	roles := map[string]bool{}
	for _, db := range migrate.Defaults() {
		roles[strings.ToUpper(db.Role)+"_DB_PASSWORD="+db.Password] = true
	}
	example := readFile(t, ".env.example")
	defaults := map[string]string{}
	for _, m := range regexp.MustCompile(`\$\{([A-Z0-9_]*PASSWORD[A-Z0-9_]*)(:?-([^}]*))?\}`).FindAllStringSubmatch(readFile(t, "docker-compose.yml"), -1) {
		name, def := m[1], m[3]
		if prev, ok := defaults[name]; ok && prev != def {
			t.Errorf("%s defaults to %q in one place and %q in another", name, prev, def)
		}
		defaults[name] = def
		if !strings.HasPrefix(def, "dev-only-") && !roles[name+"="+def] {
			t.Errorf("%s defaults to %q; want a dev-only- password", name, def)
		}
		if !strings.Contains(example, "# "+name+"=") {
			t.Errorf(".env.example does not document %s", name)
		}
	}
	for _, name := range []string{"POSTGRES_PASSWORD", "GRAFANA_ADMIN_PASSWORD", "ORDERS_DB_PASSWORD"} {
		if _, ok := defaults[name]; !ok {
			t.Errorf("docker-compose.yml does not take %s from .env", name)
		}
	}
	// The superuser: the server's password is the one init connects with.
	pg, init := loadCompose(t, "POSTGRES_PASSWORD=p1"), loadCompose(t)
	if env(pg.Services["postgres"], "POSTGRES_PASSWORD") != "p1" || !strings.Contains(env(pg.Services["init"], "PAYLAB_ADMIN_DATABASE_URL"), ":p1@") ||
		!strings.Contains(env(init.Services["init"], "PAYLAB_ADMIN_DATABASE_URL"), ":"+env(init.Services["postgres"], "POSTGRES_PASSWORD")+"@") {
		t.Error("init does not connect with the superuser password PostgreSQL was given")
	}
}
