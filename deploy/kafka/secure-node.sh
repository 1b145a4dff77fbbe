#!/usr/bin/env bash
# compose.cluster.yml's Kafka nodes: one broker+controller of three, secured
# as scripts/stack.sh secures the local stack's cluster. Writes the node's
# server.properties from its environment, formats its storage with the SCRAM
# users at the first start, and runs Kafka.
#
#   clients      SASL_SSL: TLS with the node certificate of kafka-tls
#                (deploy/kafka/tls-init.sh) and SASL/SCRAM-SHA-512.
#                INTERNAL (:9092) for the compose network, EXTERNAL (:29092)
#                for the host (published on 127.0.0.1)
#   BROKER       mutual TLS (:9094) among the brokers, principal
#                CN=paylab-kafka-node
#   CONTROLLER   mutual TLS (:9093) to the KRaft controllers
#
# The standard authorizer denies what no ACL allows; the super users are the
# nodes and paylab-admin, as which paylab init creates the topics and the
# services' ACLs (internal/platform/broker/acl.go).
#
# Environment: KAFKA_NODE_ID, CLUSTER_ID, KAFKA_CONTROLLER_QUORUM_VOTERS,
# KAFKA_ADVERTISED_LISTENERS (INTERNAL://… and EXTERNAL://…: this node's
# names for the clients), the SCRAM users' passwords SCRAM_ADMIN_PASSWORD,
# SCRAM_ORDERS_PASSWORD, SCRAM_RELAY_PASSWORD, SCRAM_LEDGER_PASSWORD and
# SCRAM_NOTIFICATIONS_PASSWORD (read at the first start only: the storage
# keeps them), and TLS_DIR (/kafka-tls); KAFKA_HOME (/opt/kafka),
# KAFKA_CONFIG_DIR and KAFKA_LOG_DIRS say where Kafka is and writes.
set -euo pipefail
die() { echo "kafka node: $*" >&2; exit 1; }
tls=${TLS_DIR:-/kafka-tls}
data=${KAFKA_LOG_DIRS:-/var/lib/kafka/data}
home=${KAFKA_HOME:-/opt/kafka}
config=${KAFKA_CONFIG_DIR:-$home/config}
: "${KAFKA_NODE_ID:?}" "${CLUSTER_ID:?}" "${KAFKA_CONTROLLER_QUORUM_VOTERS:?}" "${KAFKA_ADVERTISED_LISTENERS:?}"
[ -s "$tls/keystore-password" ] || die "no keystore in $tls: kafka-tls has not run"
kspw=$(cat "$tls/keystore-password")
host=$(hostname)
case ",$KAFKA_ADVERTISED_LISTENERS," in *,INTERNAL://*) ;; *) die "KAFKA_ADVERTISED_LISTENERS lacks INTERNAL://" ;; esac
broker_host=$(echo "$KAFKA_ADVERTISED_LISTENERS" | tr ',' '\n' | sed -n 's#^INTERNAL://\([^:]*\):.*#\1#p')

mkdir -p "$config" "$data"
umask 077
cat >"$config/server.properties" <<PROPS
# Written by deploy/kafka/secure-node.sh at the start of $host.
process.roles=broker,controller
node.id=$KAFKA_NODE_ID
controller.quorum.voters=$KAFKA_CONTROLLER_QUORUM_VOTERS
listeners=INTERNAL://:9092,EXTERNAL://:29092,BROKER://:9094,CONTROLLER://:9093
advertised.listeners=$KAFKA_ADVERTISED_LISTENERS,BROKER://$broker_host:9094
listener.security.protocol.map=INTERNAL:SASL_SSL,EXTERNAL:SASL_SSL,BROKER:SSL,CONTROLLER:SSL
inter.broker.listener.name=BROKER
controller.listener.names=CONTROLLER
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.internal.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.external.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
ssl.keystore.type=PKCS12
ssl.keystore.location=$tls/node.p12
ssl.keystore.password=$kspw
ssl.key.password=$kspw
ssl.truststore.type=PEM
ssl.truststore.location=$tls/ca.crt
listener.name.broker.ssl.client.auth=required
listener.name.controller.ssl.client.auth=required
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:CN=paylab-kafka-node;User:paylab-admin
allow.everyone.if.no.acl.found=false
log.dirs=$data
num.partitions=6
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
unclean.leader.election.enable=false
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
PROPS

# The health check's client: the node's own certificate on the BROKER
# listener (a super user, needing no SCRAM user).
cat >"$config/node-client.properties" <<PROPS
security.protocol=SSL
ssl.keystore.type=PKCS12
ssl.keystore.location=$tls/node.p12
ssl.keystore.password=$kspw
ssl.key.password=$kspw
ssl.truststore.type=PEM
ssl.truststore.location=$tls/ca.crt
PROPS

if [ ! -f "$data/meta.properties" ]; then
  scram=()
  for user in admin orders relay ledger notifications; do
    var="SCRAM_$(echo "$user" | tr a-z A-Z)_PASSWORD"
    pw=${!var:-}
    [ -n "$pw" ] || die "$var is empty"
    case "$pw" in *[],[=\"\ ]*) die "$var: a SCRAM password here may not contain , [ ] = \" or a space" ;; esac
    scram+=(--add-scram "SCRAM-SHA-512=[name=paylab-$user,password=$pw]")
  done
  echo "kafka node $KAFKA_NODE_ID: formatting the storage of cluster $CLUSTER_ID with the SCRAM users paylab-{admin,orders,relay,ledger,notifications}"
  KAFKA_HEAP_OPTS=-Xmx256M "$home/bin/kafka-storage.sh" format -t "$CLUSTER_ID" -c "$config/server.properties" "${scram[@]}"
fi

log4j=/etc/kafka/docker/log4j2.yaml
if [ -z "${KAFKA_LOG4J_OPTS:-}" ] && [ -f "$log4j" ]; then export KAFKA_LOG4J_OPTS="-Dlog4j2.configurationFile=file:$log4j"; fi
echo "kafka node $KAFKA_NODE_ID: SASL_SSL for clients ($KAFKA_ADVERTISED_LISTENERS), mutual TLS among the nodes, ACLs enforced"
exec "$home/bin/kafka-server-start.sh" "$config/server.properties"
