#!/usr/bin/env bash
# paylab-patroni's entrypoint: writes this member's Patroni configuration
# from its environment and runs Patroni, which initialises the cluster (the
# first member to take the leader key in etcd), or clones the leader and
# follows it. With another command (etcd …) it runs that instead.
#
# PATRONI_NAME                this member's name, also its host name on the network
# POSTGRES_PASSWORD           the superuser's password (postgres)
# PATRONI_REPLICATION_PASSWORD the replication user's (replicator)
# ETCD_HOSTS                  etcd's client address (etcd:2379)
# PG_SYNC                     on (default): synchronous_mode, a commit returns once the
#                             synchronous standby flushed it and only that standby is
#                             promoted; strict: no writes without one; off: asynchronous
#                             (a failover loses what the replicas had not received).
#                             Taken when the cluster is first initialised; later:
#                             patronictl edit-config
# RELAY_MODE                  wal: Patroni keeps the WAL relay's slot (outbox_wal_relay on
#                             orders) on every member, so it survives a failover
#
# `docker compose exec postgres patronictl -c /var/lib/postgresql/patroni.yml list`
# shows the leader and the replicas with their lag.
set -euo pipefail
if [ $# -gt 0 ]; then exec "$@"; fi
die() { echo "paylab-patroni: $*" >&2; exit 1; }
name=${PATRONI_NAME:?PATRONI_NAME is not set}
: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is not set}" "${PATRONI_REPLICATION_PASSWORD:?PATRONI_REPLICATION_PASSWORD is not set}"
case "${PG_SYNC:-on}" in
  on) sync=true strict=false ;;
  strict) sync=true strict=true ;;
  off) sync=false strict=false ;;
  *) die "PG_SYNC=$PG_SYNC: on, strict or off" ;;
esac
slots="{}"
[ "${RELAY_MODE:-poll}" = wal ] && slots="{outbox_wal_relay: {type: logical, database: orders, plugin: pgoutput}}"
yaml_quote() { printf "'%s'" "${1//\'/\'\'}"; }
cfg=/var/lib/postgresql/patroni.yml
umask 077
cat >"$cfg" <<YAML
# Written by paylab-patroni (deploy/patroni/member.sh) at the start of $name.
scope: paylab
namespace: /paylab/
name: $name
restapi:
  listen: 0.0.0.0:8008
  connect_address: $name:8008
etcd3:
  hosts: ${ETCD_HOSTS:-etcd:2379}
bootstrap:
  dcs:
    ttl: 15
    loop_wait: 2
    retry_timeout: 5
    # A crashed leader is failed over at once, not restarted in place.
    primary_start_timeout: 0
    maximum_lag_on_failover: 1048576
    synchronous_mode: $sync
    synchronous_mode_strict: $strict
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
    slots: $slots
    ignore_slots:
      - type: logical
  initdb:
    - encoding: UTF8
    - locale: C.UTF-8
    - data-checksums
postgresql:
  listen: 0.0.0.0:5432
  connect_address: $name:5432
  data_dir: /var/lib/postgresql/data/pgdata
  bin_dir: /usr/lib/postgresql/15/bin
  pgpass: /tmp/pgpass
  authentication:
    superuser:
      username: postgres
      password: $(yaml_quote "$POSTGRES_PASSWORD")
    replication:
      username: replicator
      password: $(yaml_quote "$PATRONI_REPLICATION_PASSWORD")
  parameters:
    unix_socket_directories: /var/run/postgresql
  pg_hba:
    - local all all trust
    - host replication replicator all scram-sha-256
    - host all all all scram-sha-256
YAML
echo "paylab-patroni: member $name of cluster paylab (synchronous_mode $sync, strict $strict), etcd ${ETCD_HOSTS:-etcd:2379}"
exec patroni "$cfg"
