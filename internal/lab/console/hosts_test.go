package console_test

import (
	"testing"

	"github.com/paylab/paylab/internal/lab/console"
)

// The allow-list: the loopback names on the listening port, the listening
// address itself when it is one, and the names given, on the listening
// port or their own.
func TestAllowHosts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		addr    string
		extra   []string
		allowed []string
		refused []string
	}{
		{
			name:    "loopback",
			addr:    "127.0.0.1:8090",
			allowed: []string{"127.0.0.1:8090", "localhost:8090", "LocalHost.:8090", "[::1]:8090"},
			refused: []string{"evil.example:8090", "evil.example", "localhost:8091", "127.0.0.1", "", "0.0.0.0:8090", "10.0.0.5:8090"},
		},
		{
			name:    "every interface (a container), names given",
			addr:    "[::]:8090",
			extra:   []string{" console.internal ", "127.0.0.1:18090", "", "[fd00::1]", "Console.Example:443"},
			allowed: []string{"localhost:8090", "console.internal:8090", "127.0.0.1:18090", "[fd00::1]:8090", "console.example:443"},
			refused: []string{"[::]:8090", "console.internal:18090", "localhost:18090", "console.example:8090", "evil.example:8090"},
		},
		{
			name:    "a specific address",
			addr:    "10.0.0.5:80",
			allowed: []string{"10.0.0.5", "10.0.0.5:80", "localhost"},
			refused: []string{"10.0.0.6:80", "evil.example"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hosts, err := console.AllowHosts(tc.addr, tc.extra...)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range tc.allowed {
				if !hosts.Allows(h) {
					t.Errorf("Host %q refused; the list: %v", h, hosts.List())
				}
			}
			for _, h := range tc.refused {
				if hosts.Allows(h) {
					t.Errorf("Host %q allowed; the list: %v", h, hosts.List())
				}
			}
		})
	}
	for _, bad := range [][]string{{"http://console.internal"}, {"console.internal:port"}, {"user@console.internal"}, {"console.internal:"}} {
		if _, err := console.AllowHosts("127.0.0.1:8090", bad...); err == nil {
			t.Errorf("AllowHosts accepted %q", bad)
		}
	}
	if _, err := console.AllowHosts("8090"); err == nil {
		t.Error("AllowHosts accepted a listen address without a port")
	}
}
