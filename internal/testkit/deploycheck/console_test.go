package deploycheck

import (
	"slices"
	"strings"
	"testing"

	"github.com/paylab/paylab/internal/lab/console"
)

// The console runs with every `docker compose up`, reaches the processes,
// databases and brokers the chaos service reaches, with the settings they
// were given, holds no chaos token, and publishes its page on the host's
// loopback only: its page places payments without a token.
func TestComposeConsole(t *testing.T) {
	t.Parallel()
	for _, dotEnv := range [][]string{nil, {"OUTBOX_MODE=naive", "INBOX_ENABLED=false", "RELAY_MODE=wal", "ORDERS_DB_PASSWORD=o1"}} {
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
			t.Errorf("console publishes %+v; want its HTTP_ADDR as 127.0.0.1:8090 only", c.Ports)
		}
	}
}

func deref(v *string) string {
	if v == nil {
		return "<unset>"
	}
	return *v
}
