package console

// Listen is where the console serves, from the environment.
type Listen struct {
	// HTTPAddr serves the page and its API. Keep it on loopback: the state
	// is open to read, and what reaches the listener may try tokens.
	HTTPAddr string `env:"HTTP_ADDR" envDefault:"127.0.0.1:8090"`
	// AllowedHosts are the names, besides localhost, 127.0.0.1 and [::1],
	// a browser may reach the page by (comma-separated; a name takes
	// HTTPAddr's port, name:port another, e.g. a port published
	// elsewhere): every other Host header is refused (AllowHosts).
	AllowedHosts []string `env:"CONSOLE_ALLOWED_HOSTS" envSeparator:","`
	// AdminAddr, when set, serves /healthz, /readyz and /metrics, as every
	// paylab process's admin listener does (a container's health check).
	AdminAddr string `env:"ADMIN_ADDR"`
}
