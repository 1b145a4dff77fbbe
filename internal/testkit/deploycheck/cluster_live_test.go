package deploycheck

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/compose-spec/compose-go/v2/cli"

	"github.com/paylab/paylab/internal/platform/broker"
)

// The running cluster of compose.cluster.yml, from the host, when
// scripts/compose-check.sh points the test at it: PAYLAB_COMPOSE_KAFKA
// (its published EXTERNAL listeners, host:port,…) and PAYLAB_COMPOSE_KAFKA_CA
// (kafka-tls's ca.crt, copied out of the volume). The principals' passwords
// are what compose gave the services (the environment and .env, else the
// dev-only defaults). Skipped otherwise: it needs the deployment.
//
// A client without TLS, one without credentials and one with a wrong
// password get nothing; the consumers' and the API's principals are
// refused order-events, the relays' the dead-letter topic; each consumer
// may use its own group only.
func TestComposeClusterRefusesLive(t *testing.T) {
	brokers, ca := strings.Split(os.Getenv("PAYLAB_COMPOSE_KAFKA"), ","), os.Getenv("PAYLAB_COMPOSE_KAFKA_CA")
	if brokers[0] == "" || ca == "" {
		t.Skip("PAYLAB_COMPOSE_KAFKA and PAYLAB_COMPOSE_KAFKA_CA are not set: no compose cluster to check (scripts/compose-check.sh sets them)")
	}
	opts, err := cli.NewProjectOptions([]string{filepath.Join(root, "docker-compose.yml"), filepath.Join(root, clusterFile)},
		cli.WithWorkingDirectory(root), cli.WithOsEnv, cli.WithDotEnv, cli.WithProfiles([]string{"*"}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	password := func(service string) string { return env(p.Services[service], broker.EnvSASLPassword) }
	as := func(user, pw string) *sarama.Config {
		cfg := broker.ProducerConfig("paylab-compose-check")
		cfg.Net.DialTimeout, cfg.Metadata.Retry.Max, cfg.Producer.Retry.Max = 10*time.Second, 2, 2
		if err := (broker.Security{Protocol: "SASL_SSL", Username: user, Password: pw, CAFile: ca}).Apply(cfg); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	produce := func(cfg *sarama.Config, topic string) error {
		pr, err := sarama.NewSyncProducer(brokers, cfg)
		if err != nil {
			return err
		}
		defer pr.Close()
		_, _, err = pr.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("compose-check"),
			Value: sarama.StringEncoder(`{"compose-check":"refused?"}`)})
		return err
	}

	plain := broker.ProducerConfig("paylab-compose-check")
	plain.Net.DialTimeout, plain.Metadata.Retry.Max = 5*time.Second, 1
	if err := produce(plain, broker.OrderEvents); err == nil {
		t.Error("a client without TLS and credentials wrote order-events")
	}
	tlsOnly := as("x", "y")
	tlsOnly.Net.SASL.Enable = false
	if err := produce(tlsOnly, broker.OrderEvents); err == nil {
		t.Error("a client with TLS and no credentials wrote order-events")
	}
	if err := produce(as(broker.PrincipalRelay, "not-its-password"), broker.OrderEvents); !errors.Is(err, sarama.ErrSASLAuthenticationFailed) {
		t.Errorf("a wrong password: %v, want %v", err, sarama.ErrSASLAuthenticationFailed)
	}
	if err := produce(as(broker.PrincipalOrders, password("orders")), broker.OrderEvents); !errors.Is(err, sarama.ErrTopicAuthorizationFailed) &&
		!errors.Is(err, sarama.ErrClusterAuthorizationFailed) {
		t.Errorf("the orders API writing order-events: %v, want %v or %v", err, sarama.ErrTopicAuthorizationFailed, sarama.ErrClusterAuthorizationFailed)
	}
	for _, svc := range []string{"ledger", "notifications"} {
		if err := produce(as(servicePrincipals[svc], password(svc)), broker.OrderEvents); !errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
			t.Errorf("%s writing order-events: %v, want %v", servicePrincipals[svc], err, sarama.ErrTopicAuthorizationFailed)
		}
	}
	if err := produce(as(broker.PrincipalRelay, password("relay")), broker.OrderEventsDeadLetter); !errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
		t.Errorf("the relays writing the dead-letter topic: %v, want %v", err, sarama.ErrTopicAuthorizationFailed)
	}
	// Each consumer's own group, and not the other's: authenticated and
	// authorized per group (the check that its refusals above are the
	// ACLs', not a failed login).
	for svc, other := range map[string]string{"ledger": "notifications", "notifications": "ledger"} {
		admin, err := sarama.NewClusterAdmin(brokers, as(servicePrincipals[svc], password(svc)))
		if err != nil {
			t.Fatalf("%s: %v", servicePrincipals[svc], err)
		}
		for group, allowed := range map[string]bool{svc: true, other: false} {
			resp, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{broker.OrderEvents: {0}})
			if err == nil && resp.Err != sarama.ErrNoError {
				err = resp.Err
			}
			if allowed && err != nil {
				t.Errorf("%s in its group %s: %v", servicePrincipals[svc], group, err)
			}
			if !allowed && !errors.Is(err, sarama.ErrGroupAuthorizationFailed) {
				t.Errorf("%s in group %s: %v, want %v", servicePrincipals[svc], group, err, sarama.ErrGroupAuthorizationFailed)
			}
		}
		admin.Close()
	}
}
