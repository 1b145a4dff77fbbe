package reconcile

import "github.com/paylab/paylab/internal/platform/broker"

// Config is where the three databases and the Kafka brokers are, from the
// environment; the defaults are the local stack's, which are also the
// ports docker-compose.yml publishes.
type Config struct {
	OrdersURL        string `env:"ORDERS_DATABASE_URL" envDefault:"postgres://orders:orders@127.0.0.1:55432/orders?sslmode=disable"`
	LedgerURL        string `env:"LEDGER_DATABASE_URL" envDefault:"postgres://ledger:ledger@127.0.0.1:55432/ledger?sslmode=disable"`
	NotificationsURL string `env:"NOTIFICATIONS_DATABASE_URL" envDefault:"postgres://notifications:notifications@127.0.0.1:55432/notifications?sslmode=disable"`
	KafkaBrokers     string `env:"KAFKA_BROKERS" envDefault:"127.0.0.1:59092"`
}

// Sources are the databases of c and, when topic is not empty, that topic
// on c's brokers.
func (c Config) Sources(topic string) Sources {
	src := Sources{OrdersURL: c.OrdersURL, LedgerURL: c.LedgerURL, NotificationsURL: c.NotificationsURL}
	if topic != "" {
		src.Brokers, src.Topic = broker.SplitBrokers(c.KafkaBrokers), topic
	}
	return src
}
