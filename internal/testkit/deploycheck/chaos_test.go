package deploycheck

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/paylab/paylab/internal/lab/chaosrun"
	"github.com/paylab/paylab/pkg/outbox"
)

func env(svc types.ServiceConfig, key string) string {
	if v := svc.Environment[key]; v != nil {
		return *v
	}
	return ""
}

func port(t *testing.T, svc types.ServiceConfig, key string) uint32 {
	t.Helper()
	p, ok, err := listenPort(svc, key)
	if !ok || err != nil {
		t.Fatalf("%s: no %s port: %v", svc.Name, key, err)
	}
	return p
}

// The chaos service reaches every process where the compose file makes it
// listen — the relays by their service name, which resolves to every
// replica — and reconciles the databases and topic the services use (the
// databases as their owners, with the passwords init gives them), with
// the token and settings they were given, whatever .env sets (with no .env
// there is no token: the chaos controls are off).
func TestComposeChaosReachesTheDeployment(t *testing.T) {
	t.Parallel()
	for _, dotEnv := range [][]string{nil, {"CHAOS_ENABLED=true", "CHAOS_TOKEN=a-token-of-my-own"}, {
		"CHAOS_ENABLED=true", "CHAOS_TOKEN=a-token-of-my-own", "OUTBOX_MODE=naive", "INBOX_ENABLED=false", "RELAY_MODE=wal",
		"ORDERS_DB_PASSWORD=o1", "LEDGER_DB_PASSWORD=l1", "NOTIFICATIONS_DB_PASSWORD=n1",
	}} {
		project := loadCompose(t, dotEnv...)
		s := project.Services
		orders, relay, ledger, notifications, chaos := s["orders"], s["relay"], s["ledger"], s["notifications"], s["chaos"]
		owner := func(svc types.ServiceConfig) string { return ownerURL(t, project, env(svc, "DATABASE_URL")) }
		want := map[string]string{
			"CHAOS_API_URL":                 fmt.Sprintf("http://orders:%d", port(t, orders, "HTTP_ADDR")),
			"CHAOS_ORDERS_ADMIN_URL":        fmt.Sprintf("http://orders:%d", port(t, orders, "ADMIN_ADDR")),
			"CHAOS_RELAY_DISCOVER":          fmt.Sprintf("%s:%d", relay.Name, port(t, relay, "ADMIN_ADDR")),
			"CHAOS_LEDGER_ADMIN_URL":        fmt.Sprintf("http://ledger:%d", port(t, ledger, "ADMIN_ADDR")),
			"CHAOS_NOTIFICATIONS_ADMIN_URL": fmt.Sprintf("http://notifications:%d", port(t, notifications, "ADMIN_ADDR")),
			"ORDERS_DATABASE_URL":           owner(orders),
			"LEDGER_DATABASE_URL":           owner(ledger),
			"NOTIFICATIONS_DATABASE_URL":    owner(notifications),
			"KAFKA_BROKERS":                 env(orders, "KAFKA_BROKERS"),
			"CHAOS_TOKEN":                   env(orders, "CHAOS_TOKEN"),
			"OUTBOX_MODE":                   env(orders, "OUTBOX_MODE"),
			"INBOX_ENABLED":                 env(ledger, "INBOX_ENABLED"),
			"RELAY_MODE":                    env(relay, "RELAY_MODE"),
		}
		for key, w := range want {
			if got := env(chaos, key); got != w || (w == "" && key != "CHAOS_TOKEN") {
				t.Errorf("%v: chaos sets %s=%q, want %q", dotEnv, key, got, w)
			}
		}
		if _, ok := chaos.Environment["CHAOS_RELAY_ADMIN_URLS"]; ok {
			t.Errorf("%v: chaos sets CHAOS_RELAY_ADMIN_URLS: relay containers have no fixed name; CHAOS_RELAY_DISCOVER finds them", dotEnv)
		}
		environ := map[string]string{}
		for k, v := range chaos.Environment {
			if v != nil {
				environ[k] = *v
			}
		}
		// Without a token the runner may refuse to start, for that alone.
		if _, err := chaosrun.LoadComposeConfig(environ); err != nil && (environ["CHAOS_TOKEN"] != "" || !strings.Contains(err.Error(), "CHAOS_TOKEN")) {
			t.Errorf("%v: the chaos service's settings do not validate: %v", dotEnv, err)
		}
		for _, svc := range []types.ServiceConfig{relay, ledger, notifications} {
			if env(svc, "CHAOS_TOKEN") != want["CHAOS_TOKEN"] || env(svc, "KAFKA_BROKERS") != want["KAFKA_BROKERS"] {
				t.Errorf("%v: %s does not share the orders API's CHAOS_TOKEN and KAFKA_BROKERS", dotEnv, svc.Name)
			}
		}
		if env(notifications, "INBOX_ENABLED") != want["INBOX_ENABLED"] {
			t.Errorf("%v: ledger and notifications disagree on INBOX_ENABLED", dotEnv)
		}
		// init grants the orders role REPLICATION exactly when the relays
		// stream a replication slot.
		if got := env(s["init"], "RELAY_MODE"); got != want["RELAY_MODE"] {
			t.Errorf("%v: init runs with RELAY_MODE=%q, the relays with %q", dotEnv, got, want["RELAY_MODE"])
		}
	}
}

// From the host, `paylab chaos run --target compose` needs no setting but
// the token: its defaults are the ports compose publishes, the credentials
// compose gives the services, and the defaults of what compose leaves unset
// (the topic, the relays' lease TTL); the token is the one .env gives the
// services (compose has none of its own), read from the same .env.
func TestChaosDefaultsMatchCompose(t *testing.T) {
	t.Parallel()
	project := loadCompose(t)
	const dotEnvToken = "a-token-of-my-own"
	cfg, err := chaosrun.LoadComposeConfig(map[string]string{"CHAOS_TOKEN": dotEnvToken})
	if err != nil {
		t.Fatal(err)
	}
	s := project.Services
	// published finds the service publishing hostPort and the container
	// port it maps to.
	published := func(hostPort string) (string, uint32) {
		for name, svc := range s {
			for _, p := range svc.Ports {
				if p.Published == hostPort {
					return name, p.Target
				}
			}
		}
		return "", 0
	}
	hostPort := func(raw string) string {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if u.Hostname() != "127.0.0.1" && u.Hostname() != "localhost" {
			t.Errorf("%s is not on this host", raw)
		}
		return u.Port()
	}
	for _, c := range []struct{ url, service, listener string }{
		{cfg.APIURL, "orders", "HTTP_ADDR"},
		{cfg.OrdersAdminURL, "orders", "ADMIN_ADDR"},
		{cfg.LedgerAdminURL, "ledger", "ADMIN_ADDR"},
		{cfg.NotificationsAdminURL, "notifications", "ADMIN_ADDR"},
	} {
		svc, target := published(hostPort(c.url))
		if svc != c.service || target != port(t, s[c.service], c.listener) {
			t.Errorf("%s: published by %q to port %d, want %s's %s", c.url, svc, target, c.service, c.listener)
		}
	}
	if len(cfg.RelayAdminURLs) != 0 || len(s["relay"].Ports) != 0 {
		t.Error("relays: compose publishes no port for them, so the runner has no default admin URL")
	}
	// The databases: the services' databases as their owners, through the
	// published port.
	for db, dbURL := range map[string]string{"orders": cfg.OrdersURL, "ledger": cfg.LedgerURL, "notifications": cfg.NotificationsURL} {
		svc, target := published(hostPort(dbURL))
		inNetwork := ownerURL(t, project, env(s[db], "DATABASE_URL"))
		if svc != "postgres" || target != 5432 || !strings.Contains(inNetwork, "@postgres:5432/") ||
			strings.Replace(inNetwork, "@postgres:5432/", "@127.0.0.1:"+hostPort(dbURL)+"/", 1) != dbURL {
			t.Errorf("%s database: default %s, compose gives the service %s (postgres published as %q → %d)", db, dbURL, inNetwork, svc, target)
		}
	}
	// Kafka: the published port is the external listener, advertised on it.
	host, kport, _ := net.SplitHostPort(cfg.KafkaBrokers)
	svc, target := published(kport)
	kafka := s["kafka"]
	if host != "127.0.0.1" || svc != "kafka" ||
		!strings.Contains(env(kafka, "KAFKA_LISTENERS"), fmt.Sprintf("EXTERNAL://:%d", target)) ||
		!strings.Contains(env(kafka, "KAFKA_ADVERTISED_LISTENERS"), "EXTERNAL://localhost:"+kport) {
		t.Errorf("KAFKA_BROKERS default %s: published by %q to %d; kafka listens on %q, advertises %q",
			cfg.KafkaBrokers, svc, target, env(kafka, "KAFKA_LISTENERS"), env(kafka, "KAFKA_ADVERTISED_LISTENERS"))
	}
	if cfg.OutboxMode != env(s["orders"], "OUTBOX_MODE") ||
		fmt.Sprint(cfg.InboxEnabled) != env(s["ledger"], "INBOX_ENABLED") || cfg.RelayMode != env(s["relay"], "RELAY_MODE") {
		t.Errorf("mode, inbox and relay mode defaults %q %t %q differ from compose's", cfg.OutboxMode, cfg.InboxEnabled, cfg.RelayMode)
	}
	if got := env(loadCompose(t, "CHAOS_ENABLED=true", "CHAOS_TOKEN="+dotEnvToken).Services["orders"], "CHAOS_TOKEN"); cfg.Token != dotEnvToken || got != dotEnvToken {
		t.Errorf("CHAOS_TOKEN in .env: the runner reads %q, compose gives the orders API %q", cfg.Token, got)
	}
	orders, _ := envVars(t, binaries(t)["orders"])
	for _, name := range []string{"orders", "relay", "ledger", "notifications"} {
		for _, key := range []string{"ORDERS_TOPIC", "RELAY_LEASE_TTL"} {
			if env(s[name], key) != "" {
				t.Errorf("%s sets %s: the runner's default assumes compose leaves it unset", name, key)
			}
		}
	}
	// Unset, RELAY_LEASE_TTL is the library's default.
	ttl, err := outbox.DefaultLeaseTTL, error(nil)
	if v := orders["RELAY_LEASE_TTL"]; v != "" {
		ttl, err = time.ParseDuration(v)
	}
	if cfg.Topic != orders["ORDERS_TOPIC"] || err != nil || cfg.LeaseTTL != ttl {
		t.Errorf("topic %q and lease TTL %s defaults differ from the services' %q and %q",
			cfg.Topic, cfg.LeaseTTL, orders["ORDERS_TOPIC"], orders["RELAY_LEASE_TTL"])
	}
}

// Nothing names a relay container: their names carry the project name (-p,
// COMPOSE_PROJECT_NAME) and a replica number, so a fixed name would miss a
// renamed project and every relay past the second after --scale relay=3.
func TestComposeNamesNoRelayContainer(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`[A-Za-z0-9_.}-]+-relay-[0-9]+`).Find(src); m != nil {
		t.Errorf("docker-compose.yml names a relay container: %s", m)
	}
	if strings.Contains(string(src), "paylab-relay-") {
		t.Error("docker-compose.yml names a relay container (paylab-relay-)")
	}
	project := loadCompose(t)
	if relay := project.Services["relay"]; relay.ContainerName != "" {
		t.Errorf("relay: container_name %q; a scaled service cannot have one", relay.ContainerName)
	}
	// The chaos service is configured the same whatever the project is
	// called.
	renamed := loadCompose(t, "COMPOSE_PROJECT_NAME=elsewhere")
	if renamed.Name != "elsewhere" {
		t.Fatalf("COMPOSE_PROJECT_NAME not honoured: project %q", renamed.Name)
	}
	for key, v := range project.Services["chaos"].Environment {
		if w := renamed.Services["chaos"].Environment[key]; v == nil || w == nil || *v != *w {
			t.Errorf("chaos: %s differs between projects paylab and elsewhere", key)
		}
	}
}

// The chaos service's results (JSON) and charts reach the host: the folder
// its --out names, from its working folder, is a writable bind mount of the
// checkout's folder of the same name (ignored by git), so the paths it
// prints are the host's, from the checkout. It writes as root, who may
// write that folder whoever owns it on the host, and its working folder is
// set, so that `run -u "$(id -u):$(id -g)"` starts too (the image's own,
// its home, admits its own user only).
func TestComposeChaosResultsReachTheHost(t *testing.T) {
	t.Parallel()
	chaos := loadCompose(t).Services["chaos"]
	args := append(slices.Clone(chaos.Entrypoint), chaos.Command...)
	var out string
	for i, a := range args {
		if a == "--out" && i+1 < len(args) {
			out = args[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--out="); ok {
			out = v
		}
	}
	if out == "" || path.IsAbs(out) || chaos.WorkingDir == "" {
		t.Fatalf("chaos runs %q in %q: want --out, relative, from a working folder it sets", args, chaos.WorkingDir)
	}
	target := path.Join(chaos.WorkingDir, out)
	want, err := filepath.Abs(filepath.Join(root, filepath.FromSlash(out)))
	if err != nil {
		t.Fatal(err)
	}
	var mounted bool
	for _, v := range chaos.Volumes {
		if v.Target != target {
			continue
		}
		mounted = true
		source, err := filepath.Abs(v.Source)
		if err != nil || v.Type != types.VolumeTypeBind || source != want || v.ReadOnly {
			t.Errorf("chaos mounts %s %s at %s (read-only %t); want the host's %s, writable", v.Type, v.Source, v.Target, v.ReadOnly, want)
		}
	}
	if !mounted {
		t.Errorf("chaos writes to %s, which no volume brings to the host", target)
	}
	if chaos.User != "0:0" && chaos.User != "root" && chaos.User != "0" {
		t.Errorf("chaos runs as %q: the image's nonroot user may not write a host folder it does not own", chaos.User)
	}
	ignore, err := os.ReadFile(filepath.Join(root, ".gitignore"))
	if err != nil || !slices.Contains(strings.Fields(string(ignore)), "/"+out+"/") {
		t.Errorf(".gitignore does not ignore /%s/ (%v)", out, err)
	}
}

// ownerURL is the service URL serviceURL (a runtime role's) rewritten to
// connect as the owner of its database, with the password init gives it.
func ownerURL(t *testing.T, project *types.Project, serviceURL string) string {
	t.Helper()
	u, err := url.Parse(serviceURL)
	if err != nil {
		t.Fatal(err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	u.User = url.UserPassword(db, env(project.Services["init"], strings.ToUpper(db)+"_DB_PASSWORD"))
	return u.String()
}
