package broker_test

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/paylab/paylab/internal/lab/localstack"
	"github.com/paylab/paylab/internal/platform/broker"
)

// secureKafka starts a private Kafka secured as scripts/stack.sh secures
// the cluster (one node; PAYLAB_SECURE_KAFKA_NODES=3 for the cluster of
// three), creates order-events and its dead-letter topic and the services'
// ACLs as the admin, and returns its addresses and `stack.sh env`.
func secureKafka(t *testing.T) ([]string, map[string]string) {
	t.Helper()
	nodes := 1
	if n, err := strconv.Atoi(os.Getenv("PAYLAB_SECURE_KAFKA_NODES")); err == nil {
		nodes = n
	}
	k, err := localstack.NewSecureKafka(nodes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k.Remove(); err != nil {
			t.Errorf("removing the private Kafka: %v", err)
		}
	})
	if err := k.Start(); err != nil {
		t.Fatal(err)
	}
	lines, err := k.ClientEnv()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range lines {
		key, value, _ := strings.Cut(kv, "=")
		env[key] = value
	}
	if env[broker.EnvSecurityProtocol] != "SASL_SSL" || env[broker.EnvCAFile] == "" || env["PAYLAB_LEDGER_PASSWORD"] == "" {
		t.Fatalf("stack.sh env of the secure Kafka: %v", lines)
	}
	admin, err := sarama.NewClusterAdmin(k.Brokers(), as(t, env, env[broker.EnvSASLUsername], env[broker.EnvSASLPassword]))
	if err != nil {
		t.Fatalf("connecting as the admin: %v", err)
	}
	defer admin.Close()
	for _, topic := range []string{broker.OrderEvents, broker.OrderEventsDeadLetter} {
		if err := broker.EnsureTopic(admin, topic, 1); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // idempotent
		if err := broker.EnsureACLs(admin); err != nil {
			t.Fatal(err)
		}
	}
	return k.Brokers(), env
}

// as is a producer's configuration that authenticates as user.
func as(t *testing.T, env map[string]string, user, password string) *sarama.Config {
	t.Helper()
	cfg := broker.ProducerConfig("paylab-test")
	cfg.Net.DialTimeout, cfg.Metadata.Retry.Max, cfg.Producer.Retry.Max = 10*time.Second, 2, 2
	if err := (broker.Security{Protocol: "SASL_SSL", Username: user, Password: password, CAFile: env[broker.EnvCAFile]}).Apply(cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// produce sends one message to topic with cfg and returns the error.
func produce(cfg *sarama.Config, brokers []string, topic string) error {
	p, err := sarama.NewSyncProducer(brokers, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("o1"), Value: sarama.StringEncoder(`{}`)})
	return err
}

// On the secured Kafka only the relays' principal writes order-events: a
// client without credentials cannot even connect, one with a wrong
// password is refused, and the consumers' principals — which may write
// the dead-letter topic — are refused order-events. Each consumer reads
// order-events in its own group only.
func TestSecureKafkaOnlyTheRelaysWriteOrderEvents(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a private Kafka")
	}
	brokers, env := secureKafka(t)

	// The control: the relays' principal writes order-events.
	if err := produce(as(t, env, broker.PrincipalRelay, env["PAYLAB_RELAY_PASSWORD"]), brokers, broker.OrderEvents); err != nil {
		t.Fatalf("the relays' principal: %v", err)
	}

	plain := broker.ProducerConfig("paylab-test")
	plain.Net.DialTimeout, plain.Metadata.Retry.Max = 5*time.Second, 1
	if err := produce(plain, brokers, broker.OrderEvents); err == nil {
		t.Error("a client without TLS and credentials wrote order-events")
	}
	tlsOnly := as(t, env, "x", "y")
	tlsOnly.Net.SASL.Enable = false
	if err := produce(tlsOnly, brokers, broker.OrderEvents); err == nil {
		t.Error("a client with TLS and no credentials wrote order-events")
	}
	if err := produce(as(t, env, broker.PrincipalRelay, "not-its-password"), brokers, broker.OrderEvents); !errors.Is(err, sarama.ErrSASLAuthenticationFailed) {
		t.Errorf("a wrong password: %v, want %v", err, sarama.ErrSASLAuthenticationFailed)
	}
	// The orders API's principal may write no topic at all: refused its
	// idempotent producer ID already.
	if err := produce(as(t, env, broker.PrincipalOrders, env["PAYLAB_ORDERS_PASSWORD"]), brokers, broker.OrderEvents); !errors.Is(err, sarama.ErrTopicAuthorizationFailed) &&
		!errors.Is(err, sarama.ErrClusterAuthorizationFailed) {
		t.Errorf("the orders API writing order-events: %v, want %v or %v", err, sarama.ErrTopicAuthorizationFailed, sarama.ErrClusterAuthorizationFailed)
	}
	for _, c := range []struct{ user, password string }{
		{broker.PrincipalLedger, env["PAYLAB_LEDGER_PASSWORD"]},
		{broker.PrincipalNotifications, env["PAYLAB_NOTIFICATIONS_PASSWORD"]},
	} {
		if err := produce(as(t, env, c.user, c.password), brokers, broker.OrderEvents); !errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
			t.Errorf("%s writing order-events: %v, want %v", c.user, err, sarama.ErrTopicAuthorizationFailed)
		}
		if err := produce(as(t, env, c.user, c.password), brokers, broker.OrderEventsDeadLetter); err != nil {
			t.Errorf("%s writing its dead-letter topic: %v", c.user, err)
		}
	}
	if err := produce(as(t, env, broker.PrincipalRelay, env["PAYLAB_RELAY_PASSWORD"]), brokers, broker.OrderEventsDeadLetter); !errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
		t.Errorf("the relays writing the dead-letter topic: %v, want %v", err, sarama.ErrTopicAuthorizationFailed)
	}

	// Each consumer reads order-events, in its own group only.
	for _, c := range []struct{ user, password, own, other string }{
		{broker.PrincipalLedger, env["PAYLAB_LEDGER_PASSWORD"], "ledger", "notifications"},
		{broker.PrincipalNotifications, env["PAYLAB_NOTIFICATIONS_PASSWORD"], "notifications", "ledger"},
	} {
		cfg := as(t, env, c.user, c.password)
		consumer, err := sarama.NewConsumer(brokers, cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.user, err)
		}
		pc, err := consumer.ConsumePartition(broker.OrderEvents, 0, sarama.OffsetOldest)
		if err != nil {
			t.Errorf("%s reading order-events: %v", c.user, err)
		} else {
			select {
			case m := <-pc.Messages():
				if string(m.Key) != "o1" {
					t.Errorf("%s read key %q", c.user, m.Key)
				}
			case err := <-pc.Errors():
				t.Errorf("%s reading order-events: %v", c.user, err)
			case <-time.After(30 * time.Second):
				t.Errorf("%s read nothing from order-events in 30 s", c.user)
			}
			pc.Close()
		}
		consumer.Close()
		admin, err := sarama.NewClusterAdmin(brokers, cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.user, err)
		}
		for group, allowed := range map[string]bool{c.own: true, c.other: false} {
			resp, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{broker.OrderEvents: {0}})
			if err == nil && resp.Err != sarama.ErrNoError {
				err = resp.Err
			}
			if allowed && err != nil {
				t.Errorf("%s in its group %s: %v", c.user, group, err)
			}
			if !allowed && !errors.Is(err, sarama.ErrGroupAuthorizationFailed) {
				t.Errorf("%s in group %s: %v, want %v", c.user, group, err, sarama.ErrGroupAuthorizationFailed)
			}
		}
		admin.Close()
	}
}
