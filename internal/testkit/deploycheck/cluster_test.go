package deploycheck

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/paylab/paylab/internal/platform/broker"
)

// clusterFile is the override that runs Kafka as three secured brokers.
const clusterFile = "compose.cluster.yml"

// kafkaNodes are the cluster's nodes, by node id.
var kafkaNodes = []string{"kafka", "kafka-2", "kafka-3"}

// loadCluster loads docker-compose.yml with compose.cluster.yml over it and
// every profile, interpolated with env (KEY=VALUE) instead of the
// environment.
func loadCluster(t *testing.T, env ...string) *types.Project {
	t.Helper()
	return loadOverrides(t, []string{clusterFile}, env...)
}

// The default deployment's one broker speaks PLAINTEXT, and says so; the
// cluster's nodes exist only in the override.
func TestComposeDefaultKafkaIsOneBroker(t *testing.T) {
	t.Parallel()
	p := loadCompose(t)
	for _, name := range kafkaNodes[1:] {
		if _, ok := p.Services[name]; ok {
			t.Errorf("docker-compose.yml runs %s: the cluster is %s's", name, clusterFile)
		}
	}
	k := p.Services["kafka"]
	if env(k, "KAFKA_CONTROLLER_QUORUM_VOTERS") != "1@kafka:9093" || !strings.Contains(env(k, "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"), "PLAINTEXT") {
		t.Errorf("the default kafka: voters %q, protocols %q; want one PLAINTEXT node",
			env(k, "KAFKA_CONTROLLER_QUORUM_VOTERS"), env(k, "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"))
	}
	if !regexp.MustCompile(`(?s)single Kafka broker speaks\s+#?\s*PLAINTEXT`).MatchString(readFile(t, "docker-compose.yml")) {
		t.Error("docker-compose.yml does not say plainly that its Kafka speaks PLAINTEXT")
	}
}

// The cluster: three nodes that agree on the voters and the cluster id,
// each started by deploy/kafka/secure-node.sh once kafka-tls made the
// certificates, with no Kafka setting of the default broker left over (its
// PLAINTEXT listeners), and init waits for all three.
func TestComposeClusterNodes(t *testing.T) {
	t.Parallel()
	p := loadCluster(t)
	const voters = "1@kafka:9093,2@kafka-2:9093,3@kafka-3:9093"
	for i, name := range kafkaNodes {
		svc, ok := p.Services[name]
		if !ok {
			t.Fatalf("%s: no service %s", clusterFile, name)
		}
		want := map[string]string{
			"KAFKA_NODE_ID": []string{"1", "2", "3"}[i], "KAFKA_CONTROLLER_QUORUM_VOTERS": voters,
			"CLUSTER_ID": env(p.Services["kafka"], "CLUSTER_ID"),
		}
		for k, v := range want {
			if got := env(svc, k); got != v {
				t.Errorf("%s: %s=%q, want %q", name, k, got, v)
			}
		}
		if adv := env(svc, "KAFKA_ADVERTISED_LISTENERS"); !strings.HasPrefix(adv, "INTERNAL://"+name+":9092,EXTERNAL://localhost:") {
			t.Errorf("%s advertises %q", name, adv)
		}
		for key, v := range svc.Environment {
			if strings.Contains(strings.ToUpper(deref(v)), "PLAINTEXT") {
				t.Errorf("%s: %s=%s", name, key, deref(v))
			}
		}
		if got := strings.Join(svc.Entrypoint, " "); got != "/bin/bash /opt/paylab/secure-node.sh" {
			t.Errorf("%s: entrypoint %q, want deploy/kafka/secure-node.sh", name, got)
		}
		if !mounts(svc, "deploy/kafka/secure-node.sh", "/opt/paylab/secure-node.sh", true) || !mounts(svc, "kafka-tls", "/kafka-tls", true) {
			t.Errorf("%s: want deploy/kafka/secure-node.sh and the volume kafka-tls mounted read-only: %+v", name, svc.Volumes)
		}
		if dep := svc.DependsOn["kafka-tls"]; dep.Condition != types.ServiceConditionCompletedSuccessfully {
			t.Errorf("%s: starts before kafka-tls has made the certificates: %+v", name, dep)
		}
		// A JVM probe in a shell's exec form outlives its timeout as an orphan.
		if hc := svc.HealthCheck; hc == nil || len(hc.Test) == 0 || hc.Test[0] != "CMD" ||
			!strings.Contains(strings.Join(hc.Test, " "), "--command-config /opt/kafka/config/node-client.properties") {
			t.Errorf("%s: want an authenticated health check in exec form (CMD): %+v", name, svc.HealthCheck)
		}
		if svc.Init == nil || !*svc.Init {
			t.Errorf("%s: no init process to reap what its health checks leave", name)
		}
		if name != "kafka" {
			if dep, ok := p.Services["init"].DependsOn[name]; !ok || dep.Condition != types.ServiceConditionHealthy {
				t.Errorf("init: want to wait for %s healthy, got %+v", name, dep)
			}
		}
	}
	tls := p.Services["kafka-tls"]
	if tls.Restart != "no" || !mounts(tls, "kafka-tls", "/kafka-tls", false) || !mounts(tls, "deploy/kafka/tls-init.sh", "/opt/paylab/tls-init.sh", true) {
		t.Errorf("kafka-tls: want a one-shot writing the volume kafka-tls with deploy/kafka/tls-init.sh: %+v", tls)
	}
}

// mounts tells whether svc mounts source (a named volume, or a path in the
// repository) at target, read-only when readOnly.
func mounts(svc types.ServiceConfig, source, target string, readOnly bool) bool {
	for _, v := range svc.Volumes {
		src := v.Source
		if v.Type == types.VolumeTypeBind {
			rel, err := filepath.Rel(mustAbs(root), src)
			if err != nil {
				continue
			}
			src = filepath.ToSlash(rel)
		}
		if src == source && v.Target == target && v.ReadOnly == readOnly {
			return true
		}
	}
	return false
}

func mustAbs(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return abs
}

// runNode runs deploy/kafka/secure-node.sh with env over a stand-in Kafka
// (kafka-storage.sh and kafka-server-start.sh record their arguments) and
// returns the server.properties it wrote and the arguments of the storage
// format ("" when it did not format).
func runNode(t *testing.T, env map[string]string, formatted bool) (props map[string]string, format string) {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"bin", "config", "data", "tls"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, content string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("bin/kafka-storage.sh", "#!/bin/sh\necho \"$@\" >\"$(dirname \"$0\")/../format.args\"\n", 0o755)
	write("bin/kafka-server-start.sh", "#!/bin/sh\necho started\n", 0o755)
	write("tls/keystore-password", "ks-secret", 0o600)
	if formatted {
		write("data/meta.properties", "node.id=1\n", 0o644)
	}
	cmd := exec.Command("bash", filepath.Join(root, "deploy", "kafka", "secure-node.sh"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "KAFKA_HOME=" + filepath.Join(dir), "TLS_DIR=" + filepath.Join(dir, "tls"),
		"KAFKA_LOG_DIRS=" + filepath.Join(dir, "data")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("secure-node.sh: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "started") {
		t.Fatalf("secure-node.sh did not start Kafka:\n%s", out)
	}
	props = map[string]string{}
	b, err := os.ReadFile(filepath.Join(dir, "config", "server.properties"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		if _, dup := props[k]; dup {
			t.Errorf("server.properties sets %s twice", k)
		}
		props[k] = v
	}
	if b, err := os.ReadFile(filepath.Join(dir, "format.args")); err == nil {
		format = string(b)
	}
	return props, format
}

// nodeEnv is the environment compose gives a node: its service's, as
// compose.cluster.yml sets it.
func nodeEnv(svc types.ServiceConfig) map[string]string {
	out := map[string]string{}
	for k, v := range svc.Environment {
		out[k] = deref(v)
	}
	return out
}

// Each node, as its script configures it: every listener TLS (SASL/SCRAM
// for clients, mutual TLS among the nodes), no PLAINTEXT one, the standard
// authorizer denying what no ACL allows, super users the nodes and
// paylab-admin only, replication factor 3 with min.insync.replicas 2, and
// the SCRAM users the services authenticate as, with the passwords compose
// gives the services.
func TestComposeClusterNodesAreSecured(t *testing.T) {
	t.Parallel()
	p := loadCluster(t, "KAFKA_RELAY_PASSWORD=relay-from-dotenv")
	for _, name := range kafkaNodes {
		props, format := runNode(t, nodeEnv(p.Services[name]), false)
		protocols := map[string]string{}
		for _, pair := range strings.Split(props["listener.security.protocol.map"], ",") {
			l, proto, _ := strings.Cut(pair, ":")
			protocols[l] = proto
		}
		var listeners []string
		for _, l := range strings.Split(props["listeners"], ",") {
			n, _, _ := strings.Cut(l, "://")
			listeners = append(listeners, n)
			switch proto := protocols[n]; proto {
			case "SASL_SSL":
				if props["listener.name."+strings.ToLower(n)+".scram-sha-512.sasl.jaas.config"] == "" {
					t.Errorf("%s: the SASL_SSL listener %s has no SCRAM login module", name, n)
				}
			case "SSL":
				if props["listener.name."+strings.ToLower(n)+".ssl.client.auth"] != "required" {
					t.Errorf("%s: the SSL listener %s does not require a client certificate", name, n)
				}
			default:
				t.Errorf("%s: listener %s speaks %q; want SASL_SSL or SSL (mutual)", name, n, proto)
			}
		}
		slices.Sort(listeners)
		if !slices.Equal(listeners, []string{"BROKER", "CONTROLLER", "EXTERNAL", "INTERNAL"}) {
			t.Errorf("%s: listeners %v", name, listeners)
		}
		for _, a := range strings.Split(props["advertised.listeners"], ",") {
			if l, _, _ := strings.Cut(a, "://"); !slices.Contains(listeners, l) || l == "CONTROLLER" {
				t.Errorf("%s advertises %s", name, a)
			}
		}
		want := map[string]string{
			"sasl.enabled.mechanisms":                  "SCRAM-SHA-512",
			"authorizer.class.name":                    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
			"allow.everyone.if.no.acl.found":           "false",
			"super.users":                              "User:CN=paylab-kafka-node;User:paylab-admin",
			"inter.broker.listener.name":               "BROKER",
			"controller.listener.names":                "CONTROLLER",
			"ssl.keystore.password":                    "ks-secret",
			"default.replication.factor":               "3",
			"min.insync.replicas":                      "2",
			"offsets.topic.replication.factor":         "3",
			"transaction.state.log.min.isr":            "2",
			"unclean.leader.election.enable":           "false",
			"auto.create.topics.enable":                "false",
			"node.id":                                  env(p.Services[name], "KAFKA_NODE_ID"),
			"controller.quorum.voters":                 env(p.Services[name], "KAFKA_CONTROLLER_QUORUM_VOTERS"),
			"transaction.state.log.replication.factor": "3",
		}
		for k, v := range want {
			if props[k] != v {
				t.Errorf("%s: %s=%q, want %q", name, k, props[k], v)
			}
		}
		// The SCRAM users, each with the password its service connects with.
		users := map[string]string{}
		for _, m := range regexp.MustCompile(`SCRAM-SHA-512=\[name=([^,]+),password=([^\]]+)\]`).FindAllStringSubmatch(format, -1) {
			users[m[1]] = m[2]
		}
		if !strings.Contains(format, "format -t "+env(p.Services[name], "CLUSTER_ID")) {
			t.Errorf("%s: storage formatted with %q", name, format)
		}
		wantUsers := map[string]string{
			"paylab-admin": env(p.Services["init"], "KAFKA_SASL_PASSWORD"),
		}
		for svc, principal := range servicePrincipals {
			wantUsers[principal] = env(p.Services[svc], "KAFKA_SASL_PASSWORD")
		}
		if !maps.Equal(users, wantUsers) {
			t.Errorf("%s: SCRAM users %v, want the services' %v", name, users, wantUsers)
		}
		if users[broker.PrincipalRelay] != "relay-from-dotenv" {
			t.Errorf("%s: KAFKA_RELAY_PASSWORD in .env gives paylab-relay %q", name, users[broker.PrincipalRelay])
		}
	}
	// A formatted node keeps its storage (and its SCRAM users).
	if _, format := runNode(t, nodeEnv(p.Services["kafka"]), true); format != "" {
		t.Errorf("a formatted node formatted again: %s", format)
	}
}

// servicePrincipals is the Kafka principal of each service that reaches
// Kafka, whose ACLs internal/platform/broker/acl.go grants.
var servicePrincipals = map[string]string{
	"orders": broker.PrincipalOrders, "relay": broker.PrincipalRelay,
	"ledger": broker.PrincipalLedger, "notifications": broker.PrincipalNotifications,
}

// Every paylab container that reaches Kafka in the cluster does so over
// SASL_SSL, checked against the CA of kafka-tls, as its own principal —
// the one the ACLs bind to what it may do, consuming in the group the ACLs
// name — and init creates the topics and those ACLs as the super user.
func TestComposeClusterClientsAuthenticate(t *testing.T) {
	t.Parallel()
	p := loadCluster(t)
	bins := binaries(t)
	clientVars := []string{broker.EnvSecurityProtocol, broker.EnvSASLUsername, broker.EnvSASLPassword, broker.EnvCAFile}
	checked := 0
	for name, svc := range p.Services {
		if svc.Image != "paylab:local" {
			continue
		}
		if _, ok := svc.Environment["KAFKA_BROKERS"]; !ok {
			continue
		}
		checked++
		if got := env(svc, "KAFKA_BROKERS"); got != "kafka:9092,kafka-2:9092,kafka-3:9092" {
			t.Errorf("%s: KAFKA_BROKERS=%q, want the three nodes' INTERNAL listeners", name, got)
		}
		if env(svc, broker.EnvSecurityProtocol) != "SASL_SSL" || env(svc, broker.EnvCAFile) != "/kafka-tls/ca.crt" ||
			!mounts(svc, "kafka-tls", "/kafka-tls", true) {
			t.Errorf("%s: %s=%q %s=%q; want SASL_SSL and the CA of the volume kafka-tls, mounted read-only", name,
				broker.EnvSecurityProtocol, env(svc, broker.EnvSecurityProtocol), broker.EnvCAFile, env(svc, broker.EnvCAFile))
		}
		want := "paylab-admin" // init, and the lab tools that read every topic
		if principal, ok := servicePrincipals[name]; ok {
			want = principal
		}
		if got := env(svc, broker.EnvSASLUsername); got != want {
			t.Errorf("%s: authenticates as %q, want %q", name, got, want)
		}
		if env(svc, broker.EnvSASLPassword) == "" {
			t.Errorf("%s: no SCRAM password", name)
		}
		if g, ok := svc.Environment["CONSUMER_GROUP"]; ok && deref(g) != name {
			t.Errorf("%s: consumer group %q; the ACLs grant the group %q", name, deref(g), name)
		}
		// The variables compose sets are the ones the binary reads: its
		// tagged configuration, and the broker's client settings.
		command := append(slices.Clone(svc.Entrypoint), svc.Command...)
		all, _ := envVars(t, bins[command[0]])
		for key := range svc.Environment {
			if _, ok := all[key]; !ok && !slices.Contains(clientVars, key) && !strings.HasPrefix(key, "OTEL_") {
				t.Errorf("%s: sets %s, which %s never reads", name, key, command[0])
			}
		}
	}
	if checked < 6 {
		t.Errorf("only %d paylab containers reach Kafka in the cluster; want init, orders, relay, ledger, notifications, console, chaos", checked)
	}
	// The ACLs: init runs `paylab init`, which creates them when it connects
	// with SASL_SSL (cmd/paylab/setup.go), as a super user.
	init := p.Services["init"]
	if !slices.Equal(init.Command, []string{"paylab", "init"}) || env(init, broker.EnvSecurityProtocol) != "SASL_SSL" {
		t.Errorf("init: %v with %s=%q; want paylab init over SASL_SSL, which creates the ACLs", init.Command,
			broker.EnvSecurityProtocol, env(init, broker.EnvSecurityProtocol))
	}
	if !strings.Contains(readFile(t, "cmd", "paylab", "setup.go"), "broker.EnsureACLs(admin)") {
		t.Error("paylab init no longer creates the ACLs")
	}
}

// The cluster's ports, the SCRAM passwords and the volume: every port on
// the host's loopback, every password from .env with a dev-only default
// documented in .env.example.
func TestComposeClusterPortsAndPasswords(t *testing.T) {
	t.Parallel()
	p := loadCluster(t)
	external := map[string]bool{}
	for name, svc := range p.Services {
		for _, port := range svc.Ports {
			if port.HostIP != "127.0.0.1" {
				t.Errorf("%s publishes %d on %q", name, port.Target, port.HostIP)
			}
			if slices.Contains(kafkaNodes, name) && port.Target == 29092 {
				external[name] = true
				if adv := env(svc, "KAFKA_ADVERTISED_LISTENERS"); !strings.HasSuffix(adv, "EXTERNAL://localhost:"+port.Published) {
					t.Errorf("%s: publishes EXTERNAL on %s but advertises %s", name, port.Published, adv)
				}
			}
		}
	}
	if len(external) != 3 {
		t.Errorf("the nodes publishing their EXTERNAL listener: %v, want all three", external)
	}
	example := readFile(t, ".env.example")
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`\$\{([A-Z0-9_]*PASSWORD[A-Z0-9_]*)(:?-([^}]*))?\}`).FindAllStringSubmatch(readFile(t, clusterFile), -1) {
		if seen[m[0]] {
			continue
		}
		seen[m[0]] = true
		if !strings.HasPrefix(m[3], "dev-only-") {
			t.Errorf("%s: %s defaults to %q; want a dev-only- password", clusterFile, m[1], m[3])
		}
		if !strings.Contains(example, "# "+m[1]+"=") {
			t.Errorf(".env.example does not document %s", m[1])
		}
	}
	if _, ok := p.Volumes["kafka-tls"]; !ok {
		t.Error("no volume kafka-tls")
	}
}
