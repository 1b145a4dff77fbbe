#!/usr/bin/env bash
# Local stack without Docker: a real PostgreSQL 15 (installed binaries) and real
# Apache Kafka (KRaft, jars from Maven Central: one combined broker+controller
# node, or a cluster of three with KAFKA_NODES=3) on 127.0.0.1. Used by
# developers, by `make test` and by CI.
#
#   scripts/stack.sh up     [pg|kafka]   start (idempotent: a running service is left alone)
#   scripts/stack.sh down   [pg|kafka]   stop only what this script started (pid files)
#   scripts/stack.sh status [pg|kafka]   report each service; exit 1 if one is down
#   scripts/stack.sh env                 print the connection settings as export lines
#
# PG_NODES=3 runs PostgreSQL as a Patroni cluster of three members instead
# (scripts/pgha.sh: ports 55441-55443, synchronous replication, PG_SYNC=off for
# asynchronous); status and env follow it while it runs, down stops both.
#
# When PAYLAB_ADMIN_DATABASE_URL (PostgreSQL) or KAFKA_BROKERS (Kafka) is already set,
# that service is taken as provided from outside and is neither started nor stopped.
#
# The single Kafka node speaks PLAINTEXT, without authentication, on 127.0.0.1
# only. The cluster (KAFKA_NODES=3) is secured (KAFKA_SECURITY=sasl, its
# default; plaintext turns it off): clients connect over TLS with SASL/SCRAM,
# the brokers and controllers talk over mutual TLS, and the standard
# authorizer denies what no ACL allows (paylab init creates the ACLs). The CA,
# certificates and passwords are generated at the first start, in the state
# folder; `scripts/stack.sh env` prints the admin's credentials and each
# service principal's password.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE=${PAYLAB_STACK_DIR:-$ROOT/.stack}
PG_PORT=${PAYLAB_PG_PORT:-55432}
KAFKA_PORT=${PAYLAB_KAFKA_PORT:-59092}
CONTROLLER_PORT=${PAYLAB_KAFKA_CONTROLLER_PORT:-59093}
INTERNAL_PORT=${PAYLAB_KAFKA_INTERNAL_PORT:-59102}
PG_PASSWORD=postgres
PG_USER=paylab-pg # the unprivileged OS user postgres runs as when we are root
KAFKA_POM=$ROOT/deploy/local/kafka/pom.xml
KAFKA_LIB=$ROOT/deploy/local/kafka/target/lib

PG_DIR=$STATE/pg
PG_DATA=$PG_DIR/data
KAFKA_DIR=$STATE/kafka
PGHA=$ROOT/scripts/pgha.sh

log() { printf 'stack: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# The addresses of the servers this script runs. A variable set to one of them
# (as `eval "$(scripts/stack.sh env)"` does) still means "ours", not external.
own_pg_url() { echo "postgres://postgres:$PG_PASSWORD@127.0.0.1:$PG_PORT/postgres?sslmode=disable"; }

external_pg() {
  [ -n "${PAYLAB_ADMIN_DATABASE_URL:-}" ] && [ "$PAYLAB_ADMIN_DATABASE_URL" != "$(own_pg_url)" ] &&
    [ "$PAYLAB_ADMIN_DATABASE_URL" != "$("$PGHA" url)" ]
}
external_kafka() {
  [ -n "${KAFKA_BROKERS:-}" ] && [ "$KAFKA_BROKERS" != "$(KAFKA_NODES=1 own_kafka)" ] &&
    [ "$KAFKA_BROKERS" != "$(KAFKA_NODES=3 own_kafka)" ]
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_for SECONDS DESCRIPTION COMMAND...: poll COMMAND until it succeeds.
wait_for() {
  local secs=$1 what=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@"; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
}

# ---------------------------------------------------------------- PostgreSQL

pg_bin() {
  local d
  for d in /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin; do
    [ -x "$d/pg_ctl" ] && { echo "$d"; return; }
  done
  command -v pg_ctl >/dev/null && { dirname "$(command -v pg_ctl)"; return; }
  die "PostgreSQL binaries not found (install postgresql-15)"
}

# as_pg runs a command as the unprivileged database user when we are root.
as_pg() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u "$PG_USER" -- "$@"
  else
    "$@"
  fi
}

pg_running() {
  [ -f "$PG_DATA/postmaster.pid" ] && as_pg "$(pg_bin)/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1
}

pg_ready() { "$(pg_bin)/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT"; }

# pg_ha: PostgreSQL is the Patroni cluster: PG_NODES=3, or no PG_NODES while
# the cluster runs and the single server does not.
pg_ha() { case "${PG_NODES:-}" in 3) return 0 ;; "") "$PGHA" running && ! pg_running ;; *) return 1 ;; esac; }

pg_init() {
  local bin; bin=$(pg_bin)
  mkdir -p "$PG_DIR"
  if [ "$(id -u)" -eq 0 ]; then
    id "$PG_USER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_USER"
    chown "$PG_USER" "$PG_DIR"
    # postgres must be able to reach its data folder through every parent.
    local d=$PG_DIR
    while [ "$d" != / ]; do d=$(dirname "$d"); chmod o+x "$d" 2>/dev/null || true; done
  fi
  log "initialising PostgreSQL data folder $PG_DATA"
  local pw; pw=$(mktemp); echo "$PG_PASSWORD" >"$pw"; chmod 644 "$pw"
  as_pg "$bin/initdb" -D "$PG_DATA" -U postgres --pwfile="$pw" --auth-host=scram-sha-256 \
    --auth-local=trust -E UTF8 --locale=C.UTF-8 >"$PG_DIR/initdb.log" 2>&1 ||
    { rm -f "$pw"; cat "$PG_DIR/initdb.log" >&2; die "initdb failed"; }
  rm -f "$pw"
  cat >>"$PG_DATA/postgresql.conf" <<CONF

# paylab local stack
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = ''
max_connections = 400
shared_buffers = 256MB
synchronous_commit = on
log_min_messages = warning
log_min_error_statement = panic
CONF
}

# pg_settings writes the settings that may change between versions of this
# script into paylab.conf, which postgresql.conf includes: a data folder made
# by an earlier version gets them at its next start. wal_level=logical lets a
# replication slot decode the outbox's inserts (the WAL relay and the
# Debezium peer of make bench-peers). max_slot_wal_keep_size bounds the WAL a
# slot may hold back: a slot nobody reads (a test or a WAL relay that died
# without dropping it) would otherwise keep every WAL segment from its
# position on until the disk fills. Past the limit PostgreSQL invalidates
# the slot (pg_replication_slots.wal_status 'lost'): it can no longer be
# streamed: drop it with the relays stopped, and once started they create it
# again and hand over the events still pending. max_wal_size: at the default
# (1GB) a write-heavy load, the bench's backlogs and seeds, makes a checkpoint
# every few seconds (PostgreSQL logs "checkpoints are occurring too
# frequently"), and each fills the WAL with full-page images again and
# stalls commits behind its writes; at 4GB checkpoints come from
# checkpoint_timeout instead.
pg_settings() {
  grep -q "^include_if_exists = 'paylab.conf'" "$PG_DATA/postgresql.conf" ||
    echo "include_if_exists = 'paylab.conf'" >>"$PG_DATA/postgresql.conf"
  cat >"$PG_DATA/paylab.conf" <<CONF
wal_level = logical
max_wal_senders = 20
max_replication_slots = 20
max_slot_wal_keep_size = 2GB
max_wal_size = 4GB
CONF
  [ "$(id -u)" -eq 0 ] && chown "$PG_USER" "$PG_DATA/paylab.conf"
  return 0
}

pg_up() {
  if external_pg; then log "PostgreSQL: using PAYLAB_ADMIN_DATABASE_URL from the environment"; return; fi
  case "${PG_NODES:-1}" in 1) ;; 3) "$PGHA" up; return ;; *) die "PG_NODES=$PG_NODES: 1 or 3" ;; esac
  if pg_running; then log "PostgreSQL already running on 127.0.0.1:$PG_PORT"; return; fi
  port_open "$PG_PORT" && die "port $PG_PORT is taken by a process this script did not start"
  [ -f "$PG_DATA/PG_VERSION" ] || pg_init
  pg_settings
  log "starting PostgreSQL on 127.0.0.1:$PG_PORT"
  as_pg "$(pg_bin)/pg_ctl" -D "$PG_DATA" -l "$PG_DIR/postgres.log" -w -t 60 start >/dev/null ||
    { tail -n 30 "$PG_DIR/postgres.log" >&2; die "PostgreSQL did not start"; }
  wait_for 30 postgres pg_ready || die "PostgreSQL is not accepting connections"
  log "PostgreSQL ready: $(pg_version)"
}

pg_version() { as_pg "$(pg_bin)/postgres" --version; }

pg_down() {
  "$PGHA" down
  if external_pg; then return; fi
  if pg_running; then
    log "stopping PostgreSQL"
    as_pg "$(pg_bin)/pg_ctl" -D "$PG_DATA" -m fast -w -t 60 stop >/dev/null
  fi
}

pg_status() {
  if external_pg; then echo "postgres: external ($PAYLAB_ADMIN_DATABASE_URL)"; return 0; fi
  if pg_ha; then "$PGHA" status; return; fi
  if pg_running && pg_ready; then
    echo "postgres: running on 127.0.0.1:$PG_PORT (pid $(head -1 "$PG_DATA/postmaster.pid"), $(pg_version))"
  else
    echo "postgres: stopped"; return 1
  fi
}

# ---------------------------------------------------------------------- Kafka
#
# KAFKA_NODES=1 (default) runs one combined broker+controller with its state
# in $KAFKA_DIR. KAFKA_NODES=3 runs a cluster: three processes, each a broker
# and a controller voter, state in $KAFKA_DIR/cluster/node-N, replication
# factor 3 and min.insync.replicas=2 for every topic (internal ones too).
# Node N listens on PAYLAB_KAFKA_PORTS' Nth entry (default: KAFKA_PORT + 2(N-1))
# and its controller on PAYLAB_KAFKA_CONTROLLER_PORTS' Nth entry. The size
# of the last `up` is remembered, so `down`, `status` and `env` need no
# KAFKA_NODES.

kafka_nodes() {
  if [ -n "${KAFKA_NODES:-}" ]; then echo "$KAFKA_NODES"
  elif [ -f "$KAFKA_DIR/nodes" ]; then cat "$KAFKA_DIR/nodes"
  else echo 1; fi
}

# nth LIST N: the Nth entry of a comma-separated list.
nth() { echo "$1" | cut -d, -f"$2"; }

node_port() {
  if [ -n "${PAYLAB_KAFKA_PORTS:-}" ]; then nth "$PAYLAB_KAFKA_PORTS" "$1"; else echo $((KAFKA_PORT + 2 * ($1 - 1))); fi
}
node_cport() {
  if [ -n "${PAYLAB_KAFKA_CONTROLLER_PORTS:-}" ]; then nth "$PAYLAB_KAFKA_CONTROLLER_PORTS" "$1"; else echo $((CONTROLLER_PORT + 2 * ($1 - 1))); fi
}
# node_iport N: node N's inter-broker listener (secured cluster only).
node_iport() {
  if [ -n "${PAYLAB_KAFKA_INTERNAL_PORTS:-}" ]; then nth "$PAYLAB_KAFKA_INTERNAL_PORTS" "$1"; else echo $((INTERNAL_PORT + 2 * ($1 - 1))); fi
}
# node_dir N: a single node keeps the layout of earlier versions of this script.
node_dir() { if [ "$(kafka_nodes)" -eq 1 ]; then echo "$KAFKA_DIR"; else echo "$KAFKA_DIR/cluster/node-$1"; fi; }

own_kafka() {
  local n i list=
  n=$(kafka_nodes)
  for i in $(seq 1 "$n"); do list="$list${list:+,}127.0.0.1:$(node_port "$i")"; done
  echo "$list"
}

node_pid() { [ -f "$(node_dir "$1")/kafka.pid" ] && cat "$(node_dir "$1")/kafka.pid"; }

pid_is_kafka() { kill -0 "$1" 2>/dev/null && grep -q 'kafka.Kafka' "/proc/$1/cmdline" 2>/dev/null; }

node_running() { local pid; pid=$(node_pid "$1") || return 1; pid_is_kafka "$pid"; }

node_ready() {
  port_open "$(node_port "$1")" &&
    grep -qE 'Transitioning from RECOVERY to RUNNING|Kafka Server started' "$(node_dir "$1")/kafka.log"
}

kafka_running() {
  local i
  for i in $(seq 1 "$(kafka_nodes)"); do node_running "$i" || return 1; done
}

kafka_jars() {
  # Resolve the broker's classpath from Maven Central once per pom version.
  local stamp=$KAFKA_LIB/.pom.sha256 want
  want=$(sha256sum "$KAFKA_POM" | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return; fi
  log "resolving the Kafka broker jars from Maven Central"
  rm -rf "$KAFKA_LIB"
  mvn -q -B -f "$KAFKA_POM" dependency:copy-dependencies >&2 || die "maven could not resolve the Kafka jars"
  echo "$want" >"$stamp"
}

kafka_java() { java -Xms256m -Xmx1g -XX:+UseG1GC -Djava.awt.headless=true -cp "$KAFKA_LIB/*" "$@"; }

# ------------------------------------------------------------- Kafka security
#
# layout_dir: the state of the single node ($KAFKA_DIR) or of the cluster.
layout_dir() { if [ "$(kafka_nodes)" -eq 1 ]; then echo "$KAFKA_DIR"; else echo "$KAFKA_DIR/cluster"; fi; }

# wanted_security: KAFKA_SECURITY, else sasl for the cluster and plaintext
# for one node.
wanted_security() {
  if [ -n "${KAFKA_SECURITY:-}" ]; then echo "$KAFKA_SECURITY"
  elif [ "$(kafka_nodes)" -ge 3 ]; then echo sasl
  else echo plaintext; fi
}

# kafka_security: sasl or plaintext, as the last `up` of this layout
# recorded it; a layout formatted before this script knew security spoke
# plaintext.
kafka_security() {
  if [ -f "$(layout_dir)/security" ]; then cat "$(layout_dir)/security"
  elif find "$(layout_dir)" -maxdepth 3 -name meta.properties 2>/dev/null | grep -q .; then echo plaintext
  else wanted_security; fi
}

SEC_DIR() { echo "$(layout_dir)/tls"; }
# The SCRAM principals: the admin (a super user: init, tests, operators) and
# one per service kind, which paylab init's ACLs bind to what it may do.
SCRAM_USERS="paylab-admin paylab-orders paylab-relay paylab-ledger paylab-notifications"

# kafka_tls_init generates, once per cluster, a CA, the nodes' certificate
# (signed by it, for 127.0.0.1 and localhost) in a PKCS12 keystore, and random
# passwords for the keystore and the SCRAM users, all in $KAFKA_DIR/tls
# (owner-only); nothing of it is in the repository.
kafka_tls_init() {
  local d; d=$(SEC_DIR)
  [ -f "$d/credentials" ] && return 0
  log "generating the Kafka cluster's CA, node certificate and SCRAM passwords in $d"
  rm -rf "$d"; mkdir -p "$d"; chmod 700 "$d"
  local ks; ks=$(openssl rand -hex 16)
  openssl req -x509 -newkey rsa:2048 -nodes -days 825 -subj "/CN=paylab local Kafka CA" \
    -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null || die "openssl: CA"
  openssl req -newkey rsa:2048 -nodes -subj "/CN=paylab-kafka-node" \
    -keyout "$d/node.key" -out "$d/node.csr" 2>/dev/null || die "openssl: node key"
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' >"$d/node.ext"
  openssl x509 -req -in "$d/node.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 825 \
    -extfile "$d/node.ext" -out "$d/node.crt" 2>/dev/null || die "openssl: node certificate"
  openssl pkcs12 -export -in "$d/node.crt" -inkey "$d/node.key" -certfile "$d/ca.crt" -name node \
    -passout "pass:$ks" -out "$d/node.p12" || die "openssl: keystore"
  rm -f "$d/node.csr" "$d/node.ext" "$d/node.key"
  {
    echo "KEYSTORE_PASSWORD=$ks"
    local u; for u in $SCRAM_USERS; do echo "$(scram_var "$u")=$(openssl rand -hex 16)"; done
  } >"$d/credentials"
  chmod 600 "$d"/*
}

# scram_var USER: the variable of USER's password in the credentials file.
scram_var() { echo "$1" | tr 'a-z-' 'A-Z_' | sed 's/$/_PASSWORD/'; }
credential() { sed -n "s/^$1=//p" "$(SEC_DIR)/credentials"; }

# security_props: node N's listeners and security settings.
security_props() {
  local i=$1 d; d=$(SEC_DIR)
  if [ "$(kafka_security)" != sasl ]; then
    cat <<PROPS
listeners=PLAINTEXT://127.0.0.1:$(node_port "$i"),CONTROLLER://127.0.0.1:$(node_cport "$i")
advertised.listeners=PLAINTEXT://127.0.0.1:$(node_port "$i")
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
PROPS
    return
  fi
  cat <<PROPS
# Clients: TLS + SASL/SCRAM-SHA-512. Brokers and controllers among
# themselves: mutual TLS with the node certificate (principal
# CN=paylab-kafka-node). The standard authorizer denies what no ACL allows.
listeners=SASL_SSL://127.0.0.1:$(node_port "$i"),INTERNAL://127.0.0.1:$(node_iport "$i"),CONTROLLER://127.0.0.1:$(node_cport "$i")
advertised.listeners=SASL_SSL://127.0.0.1:$(node_port "$i"),INTERNAL://127.0.0.1:$(node_iport "$i")
controller.listener.names=CONTROLLER
inter.broker.listener.name=INTERNAL
listener.security.protocol.map=SASL_SSL:SASL_SSL,INTERNAL:SSL,CONTROLLER:SSL
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
ssl.keystore.type=PKCS12
ssl.keystore.location=$d/node.p12
ssl.keystore.password=$(credential KEYSTORE_PASSWORD)
ssl.key.password=$(credential KEYSTORE_PASSWORD)
ssl.truststore.type=PEM
ssl.truststore.location=$d/ca.crt
listener.name.internal.ssl.client.auth=required
listener.name.controller.ssl.client.auth=required
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:CN=paylab-kafka-node;User:paylab-admin
allow.everyone.if.no.acl.found=false
PROPS
}

# scram_format_args: the SCRAM credentials a node's storage is formatted with.
scram_format_args() {
  [ "$(kafka_security)" = sasl ] || return 0
  local u
  for u in $SCRAM_USERS; do
    printf '%s\n' --add-scram "SCRAM-SHA-512=[name=$u,password=$(credential "$(scram_var "$u")")]"
  done
}

node_init() {
  local i=$1 n dir voters= j rf=1 isr=1
  n=$(kafka_nodes); dir=$(node_dir "$i")
  for j in $(seq 1 "$n"); do voters="$voters${voters:+,}$j@127.0.0.1:$(node_cport "$j")"; done
  if [ "$n" -ge 3 ]; then rf=3; isr=2; fi
  mkdir -p "$dir/data"
  cat >"$dir/server.properties" <<PROPS
# paylab local stack: node $i of $n, a combined broker+controller in KRaft mode.
process.roles=broker,controller
node.id=$i
controller.quorum.voters=$voters
$(security_props "$i")
log.dirs=$dir/data
num.partitions=6
default.replication.factor=$rf
min.insync.replicas=$isr
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=6
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$isr
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$isr
unclean.leader.election.enable=false
# A broker that stops heartbeating is fenced (its partitions get new
# leaders) after 6 s instead of 9.
broker.heartbeat.interval.ms=1000
broker.session.timeout.ms=6000
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
delete.topic.enable=true
log.retention.hours=24
log.segment.bytes=67108864
PROPS
  if [ ! -f "$dir/data/meta.properties" ]; then
    local cluster_id
    if [ "$n" -gt 1 ] && [ -f "$KAFKA_DIR/cluster/id" ]; then
      cluster_id=$(cat "$KAFKA_DIR/cluster/id")
    else
      cluster_id=$(kafka_java kafka.tools.StorageTool random-uuid 2>/dev/null | tail -1)
      [ "$n" -gt 1 ] && echo "$cluster_id" >"$KAFKA_DIR/cluster/id"
    fi
    log "formatting Kafka storage of node $i (cluster $cluster_id)"
    local scram=()
    mapfile -t scram < <(scram_format_args)
    kafka_java kafka.tools.StorageTool format -t "$cluster_id" -c "$dir/server.properties" "${scram[@]}" \
      >"$dir/format.log" 2>&1 || { cat "$dir/format.log" >&2; die "kafka storage format failed"; }
  fi
}

node_start() {
  local i=$1 dir
  dir=$(node_dir "$i")
  port_open "$(node_port "$i")" && die "port $(node_port "$i") is taken by a process this script did not start"
  node_init "$i"
  : >"$dir/kafka.log"
  # setsid: the broker outlives this script and is not hit by the caller's Ctrl-C.
  setsid bash -c 'exec java -Xms256m -Xmx1g -XX:+UseG1GC -Djava.awt.headless=true \
      -Dorg.slf4j.simpleLogger.showDateTime=true -cp "$1/*" kafka.Kafka "$2"' _ \
      "$KAFKA_LIB" "$dir/server.properties" >"$dir/kafka.log" 2>&1 </dev/null &
  echo $! >"$dir/kafka.pid"
}

kafka_up() {
  if external_kafka; then log "Kafka: using KAFKA_BROKERS=$KAFKA_BROKERS from the environment"; return; fi
  local n i recorded started=()
  n=$(kafka_nodes)
  recorded=$( [ -f "$KAFKA_DIR/nodes" ] && cat "$KAFKA_DIR/nodes" || echo 1)
  if [ "$recorded" != "$n" ] && KAFKA_NODES=$recorded kafka_any_running; then
    die "a $recorded-node Kafka is running; stop it first (make env-down)"
  fi
  case "$n" in 1|3) ;; *) die "KAFKA_NODES=$n: 1 or 3" ;; esac
  local security recorded_security
  security=$(KAFKA_NODES=$n wanted_security)
  case "$security" in sasl|plaintext) ;; *) die "KAFKA_SECURITY=$security: sasl or plaintext" ;; esac
  recorded_security=$(KAFKA_NODES=$n kafka_security)
  if [ "$recorded_security" != "$security" ] && KAFKA_NODES=$n kafka_any_running; then
    die "a Kafka with KAFKA_SECURITY=$recorded_security is running; stop it first (make env-down)"
  fi
  mkdir -p "$KAFKA_DIR/cluster"
  echo "$n" >"$KAFKA_DIR/nodes"
  if [ "$recorded_security" != "$security" ]; then
    # Its storage was formatted for the other security: start afresh.
    log "KAFKA_SECURITY=$security (was $recorded_security): removing the old data of this Kafka"
    if [ "$n" -eq 1 ]; then rm -rf "$KAFKA_DIR/data" "$KAFKA_DIR/tls"; else rm -rf "$KAFKA_DIR/cluster"; mkdir -p "$KAFKA_DIR/cluster"; fi
  fi
  echo "$security" >"$(layout_dir)/security"
  if [ "$security" = sasl ]; then kafka_tls_init; fi
  if kafka_running; then log "Kafka already running on $(own_kafka)"; return; fi
  kafka_jars
  for i in $(seq 1 "$n"); do
    node_running "$i" && continue
    log "starting Kafka node $i of $n on 127.0.0.1:$(node_port "$i")"
    node_start "$i"
    started+=("$i")
  done
  for i in "${started[@]}"; do
    if ! wait_for 120 kafka node_ready "$i"; then
      tail -n 40 "$(node_dir "$i")/kafka.log" >&2
      kafka_down
      die "Kafka node $i did not become ready"
    fi
  done
  log "Kafka ready: $(kafka_version) on $(own_kafka)"
}

kafka_any_running() {
  local i
  for i in $(seq 1 "$(kafka_nodes)"); do node_running "$i" && return 0; done
  return 1
}

kafka_version() {
  local v; v=$(grep -ohE "Kafka version: [^ ]+" "$(node_dir 1)/kafka.log" 2>/dev/null | head -1 | cut -d" " -f3)
  local what="KRaft"; [ "$(kafka_nodes)" -gt 1 ] && what="KRaft, $(kafka_nodes) nodes"
  echo "Apache Kafka ${v:-(version unknown)}, $what"
}

# stop_pid PID: SIGTERM, then SIGKILL after 30 s.
stop_pid() {
  local pid=$1
  kill -TERM "$pid" 2>/dev/null || true
  if ! wait_for 30 kafka-stop bash -c "! kill -0 $pid 2>/dev/null"; then
    log "Kafka (pid $pid) did not stop in 30 s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
    wait_for 10 kafka-kill bash -c "! kill -0 $pid 2>/dev/null" || true
  fi
}

# kafka_down stops every node this script started, whatever the size of the
# last up: the single node's pid file and each cluster node's. The nodes stop
# together, so none waits on its peers to hand over its partitions.
kafka_down() {
  if external_kafka; then return; fi
  local f pid pids=()
  for f in "$KAFKA_DIR/kafka.pid" "$KAFKA_DIR"/cluster/node-*/kafka.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if pid_is_kafka "$pid"; then
      log "stopping Kafka (pid $pid)"
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
    rm -f "$f"
  done
  for pid in "${pids[@]}"; do stop_pid "$pid"; done
}

kafka_status() {
  if external_kafka; then echo "kafka: external ($KAFKA_BROKERS)"; return 0; fi
  local i rc=0 n
  n=$(kafka_nodes)
  for i in $(seq 1 "$n"); do
    local name=kafka; [ "$n" -gt 1 ] && name="kafka node $i"
    if node_running "$i" && node_ready "$i"; then
      echo "$name: running on 127.0.0.1:$(node_port "$i") (pid $(node_pid "$i"), $(kafka_version))"
    else
      echo "$name: stopped"; rc=1
    fi
  done
  return $rc
}

# ------------------------------------------------------------------ commands

print_env() {
  local pg=${PAYLAB_ADMIN_DATABASE_URL:-$(own_pg_url)}
  if pg_ha && ! external_pg; then pg=$("$PGHA" url); fi
  local kafka; kafka=$(own_kafka)
  external_kafka && kafka=$KAFKA_BROKERS
  echo "export PAYLAB_ADMIN_DATABASE_URL='$pg'"
  echo "export KAFKA_BROKERS='$kafka'"
  if ! external_kafka && [ "$(kafka_security)" = sasl ] && [ -f "$(SEC_DIR)/credentials" ]; then
    # The admin's credentials (clients, tests and paylab init use them), and
    # each service principal's password for the services' own environment.
    echo "export KAFKA_SECURITY_PROTOCOL='SASL_SSL'"
    echo "export KAFKA_CA_FILE='$(SEC_DIR)/ca.crt'"
    echo "export KAFKA_SASL_USERNAME='paylab-admin'"
    echo "export KAFKA_SASL_PASSWORD='$(credential PAYLAB_ADMIN_PASSWORD)'"
    local u
    for u in paylab-orders paylab-relay paylab-ledger paylab-notifications; do
      echo "export $(scram_var "$u")='$(credential "$(scram_var "$u")")'"
    done
  fi
}

cmd=${1:-status}
what=${2:-all}
case "$what" in pg|postgres) what=pg ;; kafka|all) ;; *) die "unknown service '$what' (pg, kafka)" ;; esac

case "$cmd" in
  up)
    [ "$what" = kafka ] || pg_up
    [ "$what" = pg ] || kafka_up
    print_env
    ;;
  down)
    [ "$what" = pg ] || kafka_down
    [ "$what" = kafka ] || pg_down
    ;;
  status)
    rc=0
    if [ "$what" != kafka ]; then pg_status || rc=1; fi
    if [ "$what" != pg ]; then kafka_status || rc=1; fi
    exit $rc
    ;;
  env) print_env ;;
  *) die "usage: $0 up|down|status|env [pg|kafka]" ;;
esac
