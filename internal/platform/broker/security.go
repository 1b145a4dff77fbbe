package broker

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

// How a client authenticates to Kafka, from its environment. Unset, it
// speaks PLAINTEXT without authentication (the local stack's single broker
// on 127.0.0.1). SASL_SSL: TLS, the broker's certificate checked against
// KAFKA_CA_FILE, and SASL/SCRAM-SHA-512 as KAFKA_SASL_USERNAME with
// KAFKA_SASL_PASSWORD (scripts/stack.sh's cluster: `scripts/stack.sh env`
// prints them; each process kind has its own principal, which the
// broker's ACLs bind to what it may do).
const (
	EnvSecurityProtocol = "KAFKA_SECURITY_PROTOCOL"
	EnvSASLUsername     = "KAFKA_SASL_USERNAME"
	EnvSASLPassword     = "KAFKA_SASL_PASSWORD"
	EnvCAFile           = "KAFKA_CA_FILE"
)

// Security is a client's Kafka authentication.
type Security struct {
	Protocol           string // PLAINTEXT (or empty) or SASL_SSL
	Username, Password string // SCRAM-SHA-512
	CAFile             string // PEM: the certificate authority that signed the brokers'
}

// SecurityFromEnv reads the client's Kafka authentication from the
// environment.
func SecurityFromEnv() Security {
	return Security{Protocol: os.Getenv(EnvSecurityProtocol), Username: os.Getenv(EnvSASLUsername),
		Password: os.Getenv(EnvSASLPassword), CAFile: os.Getenv(EnvCAFile)}
}

// Apply configures cfg to authenticate as s says. A SASL_SSL setting it
// cannot use (no user, an unreadable CA file) leaves cfg unable to connect
// and returns why.
func (s Security) Apply(cfg *sarama.Config) error {
	switch s.Protocol {
	case "", "PLAINTEXT":
		return nil
	case "SASL_SSL":
	default:
		return fmt.Errorf("%s=%s: PLAINTEXT or SASL_SSL", EnvSecurityProtocol, s.Protocol)
	}
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	// Refuse to connect unless the settings below are complete.
	cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, tlsCfg
	cfg.Net.SASL.Enable, cfg.Net.SASL.Handshake = true, true
	cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
	cfg.Net.SASL.User, cfg.Net.SASL.Password = s.Username, s.Password
	cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.SHA512} }
	if s.Username == "" || s.Password == "" {
		return fmt.Errorf("%s=SASL_SSL needs %s and %s", EnvSecurityProtocol, EnvSASLUsername, EnvSASLPassword)
	}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			tlsCfg.RootCAs = x509.NewCertPool()
			return fmt.Errorf("%s: %w", EnvCAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			tlsCfg.RootCAs = pool
			return fmt.Errorf("%s=%s holds no PEM certificate", EnvCAFile, s.CAFile)
		}
		tlsCfg.RootCAs = pool
	}
	return nil
}

// scramClient is sarama's SCRAM conversation, by xdg-go/scram.
type scramClient struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (c *scramClient) Begin(user, password, authzID string) error {
	client, err := c.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	c.conv = client.NewConversation()
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) { return c.conv.Step(challenge) }

func (c *scramClient) Done() bool { return c.conv.Done() }

// withSecurity applies the environment's authentication to cfg; a setting
// it cannot use leaves the client unable to connect, with the reason
// logged (paylab init checks it up front).
func withSecurity(cfg *sarama.Config) *sarama.Config {
	if err := SecurityFromEnv().Apply(cfg); err != nil {
		slog.Warn("kafka client: unusable authentication settings", "error", err)
	}
	return cfg
}
