package console

// Listen is where the console serves, from the environment.
type Listen struct {
	// HTTPAddr serves the page and its API. Keep it on loopback: the
	// page's actions, but for the toggles, need no token.
	HTTPAddr string `env:"HTTP_ADDR" envDefault:"127.0.0.1:8090"`
	// AdminAddr, when set, serves /healthz, /readyz and /metrics, as every
	// paylab process's admin listener does (a container's health check).
	AdminAddr string `env:"ADMIN_ADDR"`
}
