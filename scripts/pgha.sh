#!/usr/bin/env bash
# A highly available PostgreSQL 15 for the local stack, without Docker: three
# members managed by Patroni (Debian's patroni, 3.0) with one etcd (Debian's
# etcd-server, 3.4) as its store, all on 127.0.0.1. scripts/stack.sh runs it
# instead of the single server with PG_NODES=3 (`make env-up PG_NODES=3`).
#
#   scripts/pgha.sh up       start etcd and the three members; wait for a leader and
#                            its replicas (idempotent; applies PG_SYNC to a running cluster)
#   scripts/pgha.sh down     stop the members (replicas first) and etcd: no process is left
#   scripts/pgha.sh status   the leader and the replicas with their lag; exit 1 if down
#   scripts/pgha.sh url      the admin URL: every member, target_session_attrs=read-write
#   scripts/pgha.sh leader   the leader's member name (pg1, pg2 or pg3)
#   scripts/pgha.sh running  exit 0 when a process of the cluster runs
#
# PG_SYNC=on (default): synchronous_mode. A commit returns once the
# synchronous standby has flushed it, and Patroni promotes only that standby:
# a failover loses no acknowledged commit. When no standby is healthy, the
# leader goes on alone (asynchronously) rather than stop taking writes.
# PG_SYNC=strict: synchronous_mode_strict too; the leader stops taking writes
# instead. PG_SYNC=off: asynchronous replication, where a failover loses the
# commits a replica had not received (the demonstration of that hole).
#
# Ports (127.0.0.1): members PAYLAB_PG_HA_PORTS (55441,55442,55443), their
# Patroni REST APIs PAYLAB_PG_HA_API_PORTS (58441,58442,58443), etcd
# PAYLAB_ETCD_PORT (52379) and its peer port PAYLAB_ETCD_PEER_PORT (52380).
# State: $PAYLAB_STACK_DIR/pgha (default .stack/pgha): etcd/ and pgN/ (data,
# patroni.yml, patroni.log, postgres logs under data/log).
#
# Every member runs with wal_level=logical and hot_standby_feedback=on, and
# Patroni keeps a permanent logical slot (PAYLAB_PG_HA_SLOT, default
# outbox_wal_relay, pgoutput, on database orders; empty: none): it creates it
# on the leader once the database exists and copies it to the replicas (each
# restarts once to load it), then advances it there, so the WAL relay finds its
# slot on a promoted replica. Other logical slots are left alone (ignore_slots)
# and do not survive a failover.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE=${PAYLAB_STACK_DIR:-$ROOT/.stack}
DIR=$STATE/pgha
PORTS=${PAYLAB_PG_HA_PORTS:-55441,55442,55443}
API_PORTS=${PAYLAB_PG_HA_API_PORTS:-58441,58442,58443}
ETCD_PORT=${PAYLAB_ETCD_PORT:-52379}
ETCD_PEER_PORT=${PAYLAB_ETCD_PEER_PORT:-52380}
SLOT=${PAYLAB_PG_HA_SLOT-outbox_wal_relay}
SCOPE=paylab
PG_PASSWORD=postgres
REPL_PASSWORD=replicator
PG_USER=paylab-pg # the unprivileged OS user postgres runs as when we are root
MEMBERS="1 2 3"

log() { printf 'pgha: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

nth() { echo "$1" | cut -d, -f"$2"; }
port() { nth "$PORTS" "$1"; }
api_port() { nth "$API_PORTS" "$1"; }
mdir() { echo "$DIR/pg$1"; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_for SECONDS COMMAND...: poll COMMAND until it succeeds.
wait_for() {
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.3
  done
}

pg_bin() {
  local d
  for d in /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin; do
    [ -x "$d/pg_ctl" ] && { echo "$d"; return; }
  done
  die "PostgreSQL binaries not found (install postgresql-15)"
}

# install_packages installs Debian's patroni and etcd-server when missing
# (as root). A temporary policy-rc.d keeps the packages' own services (a
# system-wide etcd on 2379, a patroni) from starting.
install_packages() {
  command -v patroni >/dev/null && command -v etcd >/dev/null && return 0
  [ "$(id -u)" -eq 0 ] || die "patroni and etcd are missing: apt-get install patroni etcd-server"
  log "installing Debian's patroni and etcd-server"
  local policy=/usr/sbin/policy-rc.d own_policy=
  if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod 755 "$policy"; own_policy=1; fi
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends patroni etcd-server >&2 ||
    { [ -n "$own_policy" ] && rm -f "$policy"; die "apt-get could not install patroni etcd-server"; }
  [ -n "$own_policy" ] && rm -f "$policy"
  return 0
}

# as_pg runs a command as the unprivileged database user when we are root;
# setpriv and env exec it, so a pid taken of it is the command's own.
AS_PG=()
[ "$(id -u)" -eq 0 ] && AS_PG=(setpriv --reuid="$PG_USER" --regid="$PG_USER" --init-groups env HOME="$DIR")
as_pg() { "${AS_PG[@]}" "$@"; }

prepare_user() {
  mkdir -p "$DIR"
  [ "$(id -u)" -eq 0 ] || return 0
  id "$PG_USER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_USER"
  chown "$PG_USER" "$DIR"
  # postgres must be able to reach its data folder through every parent.
  local d=$DIR
  while [ "$d" != / ]; do d=$(dirname "$d"); chmod o+x "$d" 2>/dev/null || true; done
}

# ----------------------------------------------------------------------- etcd

etcd_pid() { [ -f "$DIR/etcd/etcd.pid" ] && cat "$DIR/etcd/etcd.pid"; }
etcd_running() { local p; p=$(etcd_pid) && kill -0 "$p" 2>/dev/null && grep -q etcd "/proc/$p/cmdline" 2>/dev/null; }
etcd_ready() { curl -fsS "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null | grep -q '"health":"true"'; }

etcd_up() {
  if etcd_running; then return; fi
  port_open "$ETCD_PORT" && die "port $ETCD_PORT (etcd) is taken by a process this script did not start"
  mkdir -p "$DIR/etcd"
  [ "$(id -u)" -eq 0 ] && chown "$PG_USER" "$DIR/etcd"
  log "starting etcd on 127.0.0.1:$ETCD_PORT"
  # One member: the store of a local cluster. Production runs three or five
  # on separate hosts; here PostgreSQL is what fails over.
  setsid "${AS_PG[@]}" etcd --name paylab-etcd --data-dir "$DIR/etcd/data" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "paylab-etcd=http://127.0.0.1:$ETCD_PEER_PORT" --initial-cluster-state new \
    --initial-cluster-token paylab-pgha --logger zap --log-level warn --quota-backend-bytes 268435456 \
    >"$DIR/etcd/etcd.log" 2>&1 </dev/null &
  echo $! >"$DIR/etcd/etcd.pid"
  wait_for 30 etcd_ready || { tail -n 20 "$DIR/etcd/etcd.log" >&2; die "etcd did not start"; }
}

# ------------------------------------------------------------------- members

# member_config N: Patroni's configuration of member N. bootstrap.dcs is the
# cluster's shared configuration, written to etcd by the member that
# initialises the cluster; later changes go through patronictl edit-config.
member_config() {
  local i=$1 d
  d=$(mdir "$i")
  local slots="{}"
  [ -n "$SLOT" ] && slots="{$SLOT: {type: logical, database: orders, plugin: pgoutput}}"
  cat <<YAML
# paylab local stack: Patroni member pg$i of 3 (generated by scripts/pgha.sh).
scope: $SCOPE
namespace: /paylab/
name: pg$i
log:
  level: INFO
  dir: $d
restapi:
  listen: 127.0.0.1:$(api_port "$i")
  connect_address: 127.0.0.1:$(api_port "$i")
etcd3:
  hosts: 127.0.0.1:$ETCD_PORT
bootstrap:
  dcs:
    # Failure detection: a member's HA loop runs every loop_wait seconds; the
    # leader key expires ttl seconds after its holder stops renewing it.
    ttl: 15
    loop_wait: 2
    retry_timeout: 5
    # A crashed primary is failed over at once rather than restarted in place
    # (300 s by default): the standby takes over, the old primary rejoins as
    # a replica (pg_rewind when its timeline diverged).
    primary_start_timeout: 0
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    synchronous_mode_strict: false
    synchronous_node_count: 1
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_level: logical
        hot_standby: 'on'
        hot_standby_feedback: 'on'
        wal_log_hints: 'on'
        max_connections: 200
        max_wal_senders: 20
        max_replication_slots: 20
        max_slot_wal_keep_size: 2GB
        synchronous_commit: 'on'
        shared_buffers: 64MB
        max_worker_processes: 8
    # Permanent slots: created on the leader, copied to and advanced on the
    # replicas, so they exist on whichever member is promoted.
    slots: $slots
    # Patroni drops a slot it does not know; it leaves other logical slots
    # (tests', other relays') alone. They live on the leader only.
    ignore_slots:
      - type: logical
  initdb:
    - encoding: UTF8
    - locale: C.UTF-8
    - data-checksums
postgresql:
  listen: 127.0.0.1:$(port "$i")
  connect_address: 127.0.0.1:$(port "$i")
  data_dir: $d/data
  bin_dir: $(pg_bin)
  pgpass: $d/pgpass
  authentication:
    superuser:
      username: postgres
      password: $PG_PASSWORD
    replication:
      username: replicator
      password: $REPL_PASSWORD
  parameters:
    unix_socket_directories: ''
    logging_collector: 'on'
    log_directory: log
    log_filename: postgresql.log
    log_min_messages: warning
    log_min_error_statement: panic
  pg_hba:
    - host replication replicator 127.0.0.1/32 scram-sha-256
    - host all all 127.0.0.1/32 scram-sha-256
YAML
}

member_pid() { [ -f "$(mdir "$1")/patroni.pid" ] && cat "$(mdir "$1")/patroni.pid"; }
pid_is_patroni() { kill -0 "$1" 2>/dev/null && grep -q patroni "/proc/$1/cmdline" 2>/dev/null; }
member_running() { local p; p=$(member_pid "$1") && pid_is_patroni "$p"; }

# postmaster_pid N: member N's postmaster, when it runs.
postmaster_pid() {
  local f p; f=$(mdir "$1")/data/postmaster.pid
  [ -f "$f" ] || return 1
  p=$(head -1 "$f")
  kill -0 "$p" 2>/dev/null && grep -q postgres "/proc/$p/cmdline" 2>/dev/null && echo "$p"
}

member_start() {
  local i=$1 d; d=$(mdir "$i")
  port_open "$(port "$i")" && die "port $(port "$i") is taken by a process this script did not start"
  port_open "$(api_port "$i")" && die "port $(api_port "$i") is taken by a process this script did not start"
  mkdir -p "$d"
  member_config "$i" >"$d/patroni.yml"
  chmod 600 "$d/patroni.yml"
  [ "$(id -u)" -eq 0 ] && chown -R "$PG_USER" "$d"
  log "starting Patroni member pg$i: PostgreSQL on 127.0.0.1:$(port "$i"), REST API on 127.0.0.1:$(api_port "$i")"
  setsid "${AS_PG[@]}" patroni "$d/patroni.yml" >"$d/patroni.out" 2>&1 </dev/null &
  echo $! >"$d/patroni.pid"
}

# api N PATH: member N's Patroni REST API (200 or 503 alike: the body tells).
api() { curl -sS --max-time 2 "http://127.0.0.1:$(api_port "$1")$2" 2>/dev/null; }
json_field() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get(sys.argv[1], ""))' "$1" 2>/dev/null; }

patronictl_() { patronictl -c "$(mdir 1)/patroni.yml" "$@"; }

leader() {
  local i
  for i in $MEMBERS; do
    member_running "$i" || continue
    if [ "$(api "$i" /patroni | json_field role)" = master ] ||
      [ "$(api "$i" /patroni | json_field role)" = primary ]; then echo "pg$i"; return 0; fi
  done
  return 1
}

# healthy: a leader takes writes and the two replicas stream from it; in
# synchronous mode, one of them is the synchronous standby.
healthy() {
  local l; l=$(leader) || return 1
  local i=${l#pg}
  [ "$(api "$i" /patroni | json_field state)" = running ] || return 1
  local streaming
  streaming=$(api "$i" /patroni | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(1 for r in d.get("replication", []) if r.get("state") == "streaming"))' 2>/dev/null)
  [ "${streaming:-0}" -ge 2 ] || return 1
  if [ "$(sync_mode)" != off ]; then
    # PostgreSQL's synchronous standby, and Patroni's: the one it promotes.
    api "$i" /patroni | grep -q '"sync_state": *"sync"' || return 1
    local j synced=
    for j in $MEMBERS; do [ "$(api "$j" /patroni | json_field sync_standby)" = True ] && synced=1; done
    [ -n "$synced" ] || return 1
  fi
}

wanted_sync() {
  case "${PG_SYNC:-on}" in on|off|strict) echo "${PG_SYNC:-on}" ;; *) die "PG_SYNC=$PG_SYNC: on, strict or off" ;; esac
}

# sync_mode: on, strict or off, as the cluster's configuration has it now.
sync_mode() {
  local i c
  for i in $MEMBERS; do
    c=$(api "$i" /config) && [ -n "$c" ] && break
  done
  echo "$c" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print("off" if not d.get("synchronous_mode") else "strict" if d.get("synchronous_mode_strict") else "on")' 2>/dev/null
}

apply_sync() {
  local want have; want=$(wanted_sync); have=$(sync_mode)
  [ "$want" = "$have" ] && return 0
  log "replication: $have -> $want (PG_SYNC=$want)"
  local mode=true strict=false
  [ "$want" = off ] && mode=false
  [ "$want" = strict ] && strict=true
  patronictl_ edit-config --force --quiet -s "synchronous_mode=$mode" -s "synchronous_mode_strict=$strict" >/dev/null
}

running() {
  etcd_running && return 0
  local i
  for i in $MEMBERS; do member_running "$i" && return 0; postmaster_pid "$i" >/dev/null && return 0; done
  return 1
}

up() {
  wanted_sync >/dev/null
  install_packages
  prepare_user
  etcd_up
  local i fresh=
  [ -d "$(mdir 1)/data" ] || fresh=1
  for i in $MEMBERS; do
    member_running "$i" && continue
    member_start "$i"
    # The first member initialises the cluster; the others clone it.
    if [ -n "$fresh" ] && [ "$i" = 1 ]; then
      wait_for 90 leader >/dev/null || { tail -n 30 "$(mdir 1)/patroni.log" "$(mdir 1)/patroni.out" >&2; die "pg1 did not become the leader"; }
    fi
  done
  if [ -n "$fresh" ] && [ "$(wanted_sync)" != on ]; then apply_sync; fi
  if ! wait_for 180 healthy; then
    for i in $MEMBERS; do tail -n 15 "$(mdir "$i")/patroni.log" >&2 2>/dev/null || true; done
    die "the cluster did not become healthy (a leader and two streaming replicas)"
  fi
  apply_sync
  [ "$(wanted_sync)" = off ] || wait_for 30 healthy || die "no synchronous standby"
  log "PostgreSQL cluster ready: leader $(leader), replication $(sync_mode); $(url)"
}

# stop_member N: SIGTERM Patroni (it stops PostgreSQL, fast), wait, then
# make sure the postmaster is gone.
stop_pids() {
  local p
  for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "$@"; do
    if ! wait_for 60 bash -c "! kill -0 $p 2>/dev/null"; then
      log "pid $p did not stop in 60 s; killing it"
      kill -KILL "$p" 2>/dev/null || true
    fi
  done
}

stop_members() {
  local i p pids=()
  for i in "$@"; do
    if member_running "$i"; then
      log "stopping Patroni member pg$i"
      pids+=("$(member_pid "$i")")
    fi
  done
  [ ${#pids[@]} -eq 0 ] || stop_pids "${pids[@]}"
  for i in "$@"; do
    rm -f "$(mdir "$i")/patroni.pid"
    if p=$(postmaster_pid "$i"); then
      log "stopping the PostgreSQL of pg$i that Patroni left (pid $p)"
      as_pg "$(pg_bin)/pg_ctl" -D "$(mdir "$i")/data" -m fast -w -t 60 stop >/dev/null 2>&1 || kill -KILL "$p" 2>/dev/null || true
    fi
  done
}

down() {
  [ -d "$DIR" ] || return 0
  # Replicas first, so no replica takes over from a leader that stops.
  local l i replicas=()
  l=$(leader 2>/dev/null) || l=
  for i in $MEMBERS; do [ "pg$i" = "$l" ] || replicas+=("$i"); done
  stop_members "${replicas[@]}"
  [ -z "$l" ] || stop_members "${l#pg}"
  if etcd_running; then
    log "stopping etcd"
    stop_pids "$(etcd_pid)"
  fi
  rm -f "$DIR/etcd/etcd.pid"
}

url() {
  local i hosts=
  for i in $MEMBERS; do hosts="$hosts${hosts:+,}127.0.0.1:$(port "$i")"; done
  echo "postgres://postgres:$PG_PASSWORD@$hosts/postgres?sslmode=disable&target_session_attrs=read-write"
}

status() {
  local l
  if ! running; then echo "postgres: Patroni cluster stopped"; return 1; fi
  if ! l=$(leader); then
    echo "postgres: Patroni cluster without a leader"
    patronictl_ list 2>/dev/null || true
    return 1
  fi
  echo "postgres: Patroni cluster '$SCOPE' of 3, leader $l on 127.0.0.1:$(port "${l#pg}"), replication $(sync_mode), etcd on 127.0.0.1:$ETCD_PORT"
  patronictl_ list 2>/dev/null | sed 's/^/  /'
  # The leader's view of each replica: bytes of WAL not yet flushed and not
  # yet replayed there, and the time it last took to replay.
  PGPASSWORD=$PG_PASSWORD "$(pg_bin)/psql" -X -q -h 127.0.0.1 -p "$(port "${l#pg}")" -U postgres -d postgres -P footer=off -c "
    SELECT application_name AS member, state, sync_state,
           pg_wal_lsn_diff(pg_current_wal_lsn(), flush_lsn) AS flush_lag_bytes,
           pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn) AS replay_lag_bytes,
           COALESCE(replay_lag, '0'::interval) AS replay_lag
      FROM pg_stat_replication ORDER BY application_name" 2>/dev/null | sed 's/^/  /' || true
  healthy
}

cmd=${1:-status}
case "$cmd" in
  up) up ;;
  down) down ;;
  status) status ;;
  url) url ;;
  leader) leader ;;
  running) running ;;
  *) die "usage: $0 up|down|status|url|leader|running" ;;
esac
