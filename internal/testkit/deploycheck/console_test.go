package deploycheck

import (
	"slices"
	"strings"
	"testing"

	"github.com/paylab/paylab/internal/lab/console"
	"github.com/paylab/paylab/internal/platform/envconfig"
)

// The console runs with every `docker compose up`, reaches the processes,
// databases and brokers the chaos service reaches, with the settings they
// were given, holds no chaos token, listens on every interface of its
// container and publishes its page on the host's loopback only, and
// answers the names a browser on the host reaches it by — and no other:
// its state is open to read.
func TestComposeConsole(t *testing.T) {
	t.Parallel()
	for _, dotEnv := range [][]string{nil, {"OUTBOX_MODE=naive", "INBOX_ENABLED=false", "RELAY_MODE=wal", "ORDERS_DB_PASSWORD=o1",
		"CONSOLE_ALLOWED_HOSTS=console.example,localhost:18090"}} {
		project := loadCompose(t, dotEnv...)
		c, ok := project.Services["console"]
		if !ok {
			t.Fatal("no console service")
		}
		if len(c.Profiles) != 0 {
			t.Errorf("console sits under the profiles %v; docker compose up must start it", c.Profiles)
		}
		if got := strings.Join(append(slices.Clone(c.Entrypoint), c.Command...), " "); got != "paylab console --target compose" {
			t.Errorf("console runs %q", got)
		}
		chaos := project.Services["chaos"]
		for key, v := range chaos.Environment {
			if key == "CHAOS_TOKEN" {
				continue
			}
			if w := c.Environment[key]; v == nil || w == nil || *v != *w {
				t.Errorf("%v: console sets %s=%v, the chaos service %v", dotEnv, key, deref(w), deref(v))
			}
		}
		if _, ok := c.Environment["CHAOS_TOKEN"]; ok {
			t.Errorf("%v: console sets CHAOS_TOKEN; it must hold none", dotEnv)
		}
		environ := map[string]string{}
		for k, v := range c.Environment {
			environ[k] = deref(v)
		}
		if _, err := console.LoadComposeConfig(environ); err != nil {
			t.Errorf("%v: the console's settings do not validate: %v", dotEnv, err)
		}
		if len(c.Ports) != 1 || c.Ports[0].HostIP != "127.0.0.1" || c.Ports[0].Published != "8090" || c.Ports[0].Target != port(t, c, "HTTP_ADDR") {
			t.Fatalf("console publishes %+v; want its HTTP_ADDR as 127.0.0.1:8090 only", c.Ports)
		}
		listen, err := envconfig.Load(environ, console.Listen{}, nil)
		if err != nil {
			t.Fatalf("%v: the console's listener settings: %v", dotEnv, err)
		}
		if host, _, _ := strings.Cut(listen.HTTPAddr, ":"); host != "" && host != "0.0.0.0" {
			t.Errorf("%v: console listens on %s: the published port reaches the container's interface, not its loopback", dotEnv, listen.HTTPAddr)
		}
		hosts, err := console.AllowHosts(listen.HTTPAddr, listen.AllowedHosts...)
		if err != nil {
			t.Fatalf("%v: %v", dotEnv, err)
		}
		published := c.Ports[0].Published
		allowed := []string{"127.0.0.1:" + published, "localhost:" + published, "[::1]:" + published}
		if dotEnv != nil {
			allowed = append(allowed, "console.example:"+published, "localhost:18090")
		}
		for _, h := range allowed {
			if !hosts.Allows(h) {
				t.Errorf("%v: the console refuses Host %s, which a browser on the host sends; it answers %v", dotEnv, h, hosts.List())
			}
		}
		for _, h := range []string{"evil.example:" + published, "console:" + published, "0.0.0.0:" + published} {
			if hosts.Allows(h) {
				t.Errorf("%v: the console answers Host %s", dotEnv, h)
			}
		}
	}
}

func deref(v *string) string {
	if v == nil {
		return "<unset>"
	}
	return *v
}
