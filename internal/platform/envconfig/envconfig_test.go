package envconfig_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/paylab/paylab/internal/platform/envconfig"
)

type Shared struct {
	DatabaseURL string `env:"DATABASE_URL" redact:"password"`
	Token       string `env:"TOKEN" redact:"value"`
}

type config struct {
	Shared
	Timeout time.Duration `env:"TIMEOUT" envDefault:"5s"`
	Name    string        `env:"NAME"`
}

func TestLoad(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		environ map[string]string
		want    string // in the error; "" for none
	}{
		{"defaults", map[string]string{}, ""},
		{"parse error names the variable", map[string]string{"TIMEOUT": "soon"}, "configuration: TIMEOUT: invalid time.Duration value"},
		{"validation", map[string]string{"NAME": "bad"}, "NAME is bad"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := envconfig.Load(tc.environ, config{Name: "base"}, func(c config) error {
				if c.Name == "bad" {
					return errors.New("NAME is bad")
				}
				return nil
			})
			if tc.want == "" {
				if err != nil || cfg.Timeout != 5*time.Second || cfg.Name != "base" {
					t.Fatalf("cfg %+v, err %v; want the default and base values", cfg, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestLogValueMasksSecrets(t *testing.T) {
	t.Parallel()
	c := config{Shared: Shared{DatabaseURL: "postgres://orders:hunter2@db:5432/orders", Token: "hunter2-token"}, Timeout: time.Second}
	s := envconfig.LogValue(c).String()
	if strings.Contains(s, "hunter2") || !strings.Contains(s, "DATABASE_URL=postgres://orders:xxxxx@db:5432/orders") ||
		!strings.Contains(s, "TOKEN=***") || !strings.Contains(s, "TIMEOUT=1s") {
		t.Errorf("LogValue = %s", s)
	}
	if got := envconfig.RedactIn("cannot parse postgres://orders:hunter2@db", c.DatabaseURL); strings.Contains(got, "hunter2") {
		t.Errorf("RedactIn = %s", got)
	}
}
