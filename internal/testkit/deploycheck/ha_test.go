package deploycheck

import (
	"context"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// haFile is the override that runs PostgreSQL as a Patroni cluster.
const haFile = "compose.ha.yml"

// pgMembers are the Patroni cluster's members.
var pgMembers = []string{"postgres", "postgres-2", "postgres-3"}

// loadOverrides loads docker-compose.yml with the overrides over it, every
// profile on, interpolated with env (KEY=VALUE) instead of the environment.
func loadOverrides(t *testing.T, overrides []string, env ...string) *types.Project {
	t.Helper()
	files := []string{filepath.Join(root, "docker-compose.yml")}
	for _, o := range overrides {
		files = append(files, filepath.Join(root, o))
	}
	opts, err := cli.NewProjectOptions(files, cli.WithWorkingDirectory(root), cli.WithEnv(env), cli.WithProfiles([]string{"*"}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("docker-compose.yml with %v does not load: %v", overrides, err)
	}
	return p
}

// The HA override: three Patroni members of the image built from
// deploy/patroni (Debian's packages), each with a volume of its own, an
// etcd they wait for, synchronous replication unless .env says otherwise,
// and every paylab container pointed at all three members with
// target_session_attrs=read-write, so it follows the leader.
func TestComposeHA(t *testing.T) {
	t.Parallel()
	p := loadOverrides(t, []string{haFile})
	volumes := map[string]bool{}
	for _, name := range pgMembers {
		svc, ok := p.Services[name]
		if !ok {
			t.Fatalf("%s: no service %s", haFile, name)
		}
		if svc.Image != "paylab-patroni:local" || svc.Build == nil || filepath.Base(svc.Build.Context) != "patroni" {
			t.Errorf("%s: image %q built from %+v; want paylab-patroni:local from deploy/patroni", name, svc.Image, svc.Build)
		}
		if len(svc.Command) != 0 || env(svc, "PATRONI_NAME") != name {
			t.Errorf("%s: command %v, PATRONI_NAME %q; want Patroni as member %s", name, svc.Command, env(svc, "PATRONI_NAME"), name)
		}
		if env(svc, "PG_SYNC") != "on" {
			t.Errorf("%s: PG_SYNC=%q without .env; want synchronous replication", name, env(svc, "PG_SYNC"))
		}
		if dep := svc.DependsOn["etcd"]; dep.Condition != types.ServiceConditionHealthy {
			t.Errorf("%s: does not wait for etcd: %+v", name, dep)
		}
		if len(svc.Volumes) != 1 || svc.Volumes[0].Target != "/var/lib/postgresql/data" || volumes[svc.Volumes[0].Source] ||
			svc.Volumes[0].Source == "pgdata" {
			t.Errorf("%s: volumes %+v; want one of its own (not the single server's pgdata)", name, svc.Volumes)
		} else {
			volumes[svc.Volumes[0].Source] = true
		}
		if svc.HealthCheck == nil || !strings.Contains(strings.Join(svc.HealthCheck.Test, " "), ":8008/health") {
			t.Errorf("%s: health check %+v; want Patroni's /health", name, svc.HealthCheck)
		}
		if svc.Restart != "unless-stopped" {
			t.Errorf("%s: restart %q", name, svc.Restart)
		}
		if name != "postgres" {
			if dep := p.Services["init"].DependsOn[name]; dep.Condition != types.ServiceConditionHealthy {
				t.Errorf("init: does not wait for %s: %+v", name, dep)
			}
		}
	}
	if env(loadOverrides(t, []string{haFile}, "PG_SYNC=off").Services["postgres-2"], "PG_SYNC") != "off" {
		t.Error("PG_SYNC in .env does not reach the members")
	}

	urls := 0
	for name, svc := range p.Services {
		if svc.Image != "paylab:local" {
			continue
		}
		for key, v := range svc.Environment {
			if !strings.HasSuffix(key, "DATABASE_URL") || v == nil {
				continue
			}
			urls++
			u, err := url.Parse(*v)
			if err != nil {
				t.Errorf("%s: %s: %v", name, key, err)
				continue
			}
			if got := strings.Split(u.Host, ","); !slices.Equal(got, []string{"postgres:5432", "postgres-2:5432", "postgres-3:5432"}) {
				t.Errorf("%s: %s lists %v; want the three members", name, key, got)
			}
			if u.Query().Get("target_session_attrs") != "read-write" {
				t.Errorf("%s: %s=%s; want target_session_attrs=read-write (the leader)", name, key, *v)
			}
			// The same role and password as docker-compose.yml gives it.
			single := loadCompose(t).Services[name]
			if s, err := url.Parse(env(single, key)); err != nil || s.User.String() != u.User.String() || s.Path != u.Path {
				t.Errorf("%s: %s connects as %s to %s; docker-compose.yml as %v", name, key, u.User.Username(), u.Path, s)
			}
		}
	}
	if urls < 9 {
		t.Errorf("only %d database URLs found in the paylab containers", urls)
	}
	etcd := p.Services["etcd"]
	if etcd.Image != "paylab-patroni:local" || len(etcd.Command) == 0 || etcd.Command[0] != "etcd" || etcd.HealthCheck == nil {
		t.Errorf("etcd: %v %v", etcd.Image, etcd.Command)
	}
}

// The image is built from Debian's packages, and the member's
// configuration has the settings the failover relies on.
func TestPatroniImage(t *testing.T) {
	t.Parallel()
	docker := readFile(t, "deploy", "patroni", "Dockerfile")
	for _, pkg := range []string{"postgresql-15", "patroni", "etcd-server"} {
		if !regexp.MustCompile(`(?m)^\s+.*\b` + pkg + `\b`).MatchString(docker) {
			t.Errorf("deploy/patroni/Dockerfile does not install Debian's %s", pkg)
		}
	}
	member := readFile(t, "deploy", "patroni", "member.sh")
	for _, want := range []string{"synchronous_mode: $sync", "primary_start_timeout: 0", "use_pg_rewind: true",
		"hot_standby_feedback: 'on'", "wal_level: logical", "host all all all scram-sha-256"} {
		if !strings.Contains(member, want) {
			t.Errorf("deploy/patroni/member.sh lacks %q", want)
		}
	}
}

// The HA override's ports are on the host's loopback, its passwords from
// .env with dev-only defaults documented in .env.example.
func TestComposeHAPortsAndPasswords(t *testing.T) {
	t.Parallel()
	p := loadOverrides(t, []string{clusterFile, haFile})
	for name, svc := range p.Services {
		for _, port := range svc.Ports {
			if port.HostIP != "127.0.0.1" {
				t.Errorf("%s publishes %d on %q", name, port.Target, port.HostIP)
			}
		}
	}
	example := readFile(t, ".env.example")
	for _, m := range regexp.MustCompile(`\$\{([A-Z0-9_]*PASSWORD[A-Z0-9_]*)(:?-([^}]*))?\}`).FindAllStringSubmatch(readFile(t, haFile), -1) {
		if !strings.HasPrefix(m[3], "dev-only-") && m[3] != strings.ToLower(strings.TrimSuffix(m[1], "_DB_PASSWORD")) {
			t.Errorf("%s: %s defaults to %q", haFile, m[1], m[3])
		}
		if !strings.Contains(example, "# "+m[1]+"=") {
			t.Errorf(".env.example does not document %s", m[1])
		}
	}
	if !strings.Contains(example, "# PG_SYNC=") {
		t.Error(".env.example does not document PG_SYNC")
	}
}
