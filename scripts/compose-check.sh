#!/usr/bin/env bash
# compose-check: docker-compose.yml for real, end to end, on a Docker engine.
#
#   make compose-check
#
# Builds the images, brings the whole deployment up and waits for its health
# checks, checks that init printed the demo merchant's API key and that the
# API refuses a request without one, places payments through the orders API
# with a key of its own (one of them replayed by its Idempotency-Key), waits
# for the ledger to book them and Mailpit to hold the receipts, checks that
# every service connects to PostgreSQL as its own runtime role and that such
# a role is refused DDL and the other services' databases, scales the relays
# to three, runs the chaos service's quick set inside the compose network
# (every relay found by name; the deployment runs with CHAOS_ENABLED=true and
# a fresh CHAOS_TOKEN), and takes it all down again (`down -v`), also when a
# step fails.
#
# With compose.cluster.yml in COMPOSE_FILE (Kafka as three secured brokers)
# it also checks the cluster from the host: TestComposeClusterRefusesLive
# (internal/testkit/deploycheck) connects to the published listeners with
# the CA of kafka-tls and is refused without TLS, without credentials, with
# a wrong password, and as a principal the ACLs do not allow.
#
# Needs a Docker engine with compose v2 and buildx, able to build or pull the
# images docker-compose.yml and the Dockerfile name, plus curl and jq (and
# Go for the cluster's check). It is not part of make test (no Docker engine
# in CI).
#
# Settings (the environment):
#   COMPOSE_PROJECT_NAME  the project (default paylab-check, so a `docker
#                         compose up` of the default project is left alone)
#   COMPOSE_FILE          compose's own list of files, ':'-separated, e.g.
#                         docker-compose.yml:ports-override.yml to publish
#                         PostgreSQL and Kafka elsewhere when make env-up's
#                         servers hold 55432/59092, or
#                         docker-compose.yml:compose.cluster.yml:ports-override.yml
#                         for the secured Kafka cluster
#   COMPOSE_CHECK_WAIT    seconds to wait for health, the ledger, the mail (300)
#   COMPOSE_CHECK_KEEP=1  leave the deployment running (no down -v at the end)
set -euo pipefail
cd "$(dirname "$0")/.."

export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-paylab-check}
# The chaos service needs the chaos controls: on for this deployment, behind
# a fresh token (the environment wins over .env).
export CHAOS_ENABLED=true
CHAOS_TOKEN=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
export CHAOS_TOKEN
wait_s=${COMPOSE_CHECK_WAIT:-300}
payments=3
merchant="mer_check_$(date +%s)"
amount=1250

step() { printf '\n=== %s  %s\n' "$(date +%T)" "$*"; }
fail() { printf 'compose-check: FAIL: %s\n' "$*" >&2; exit 1; }
dc() { docker compose --profile chaos "$@"; }

for tool in docker curl jq; do
  command -v "$tool" >/dev/null || fail "$tool is not installed"
done
docker info >/dev/null 2>&1 || fail "no Docker engine answers (docker info); README: Check the compose file for real"
docker compose version >/dev/null 2>&1 || fail "docker compose (v2) is not installed"

cleanup() {
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    step "failed (exit $rc): the containers, and the logs of those not healthy"
    dc ps -a || true
    # every container that ran and is not fine: unhealthy, still starting,
    # or exited with an error (not init's exit 0, not one never started)
    for c in $(dc ps -a --format '{{.Name}}|{{.Health}}|{{.State}}|{{.ExitCode}}' 2>/dev/null |
      awk -F'|' '$3 != "created" && $2 != "healthy" && !($2 == "" && $3 == "running") && !($3 == "exited" && $4 == 0) {print $1}'); do
      echo "--- $c"; docker logs --tail 40 "$c" 2>&1 || true
    done
  fi
  if [ "${COMPOSE_CHECK_KEEP:-}" = 1 ]; then
    step "left running (COMPOSE_CHECK_KEEP=1): docker compose -p $COMPOSE_PROJECT_NAME down -v"
  else
    step "docker compose down -v"
    dc down -v --remove-orphans || true
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "project $COMPOSE_PROJECT_NAME, files ${COMPOSE_FILE:-docker-compose.yml}; $(docker compose version)"
dc down -v --remove-orphans >/dev/null 2>&1 || true # what an interrupted run left behind

# The host ports the deployment publishes must be free: say which are not
# before compose fails on the first.
busy=""
for p in $(docker compose config --format json | jq -r '.services[].ports[]?.published' | sort -un); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then busy="$busy $p"; fi
done
[ -z "$busy" ] || fail "host ports in use:$busy; publish them elsewhere with an override file in COMPOSE_FILE" \
  "(docker-compose.yml:ports-override.yml, its services' ports: !override)"

step "docker compose build"
docker compose build

step "docker compose up -d --wait"
docker compose up -d --wait --wait-timeout "$wait_s"
docker compose ps -a --format 'table {{.Name}}\t{{.Status}}'

# published HOST:PORT of a service's container port, as localhost
published() {
  local hp
  hp=$(docker compose port "$1" "$2") || fail "$1 publishes no port $2"
  echo "127.0.0.1:${hp##*:}"
}
api=$(published orders 8080)
ledger=$(published ledger 8082)
mailpit=$(published mailpit 8025)

step "the demo API key init printed, and a request without a key"
# init printed the demo merchant's key (docs/compose.md: the curl of the
# README uses it); the API answers it, and refuses a request without one.
demo_key=$(docker compose logs --no-log-prefix init | sed -n 's/^PAYLAB_API_KEY=\(plk_[A-Za-z0-9_]*\).*/\1/p' | tail -1)
[ -n "$demo_key" ] || fail "init printed no demo API key"
code=$(curl -sS -o /dev/null -w '%{http_code}' "http://$api/v1/orders/0193a5c2-7f3e-7b1a-9c1d-3e5f7a9b1c2d" \
  -H "Authorization: Bearer $demo_key")
echo "  GET /v1/orders/<unknown> with the demo key -> $code"
[ "$code" = 404 ] || fail "the demo key: GET of an unknown order answered $code, want 404"
code=$(curl -sS -o /dev/null -w '%{http_code}' -X POST "http://$api/v1/payments" -H 'Content-Type: application/json' \
  -H "Idempotency-Key: $merchant-nokey" -d '{"customer_id":"cus_check","amount":1,"currency":"EUR"}')
echo "  POST /v1/payments without a key -> $code"
[ "$code" = 401 ] || fail "a payment without an API key answered $code, want 401"

# The database servers as init reaches them: one, or with compose.ha.yml
# every member with target_session_attrs=read-write (the leader).
admin_url=$(docker compose config --format json | jq -r '.services.init.environment.PAYLAB_ADMIN_DATABASE_URL')
pg_hosts=${admin_url#*@} pg_hosts=${pg_hosts%%/*}
pg_query=${admin_url#*\?}
[ "$pg_query" != "$admin_url" ] || pg_query=""
owner_url() { echo "postgres://$1:$2@$pg_hosts/$3?$pg_query"; } # owner_url ROLE PASSWORD DATABASE

step "an API key of $merchant (paylab keys create, in the init image)"
# The check pays to a merchant of its own, whose key it creates as the
# databases' owners do.
api_key=$(docker compose run --rm --no-deps -T \
  -e ORDERS_DATABASE_URL="$(owner_url orders "${ORDERS_DB_PASSWORD:-orders}" orders)" \
  -e LEDGER_DATABASE_URL="$(owner_url ledger "${LEDGER_DB_PASSWORD:-ledger}" ledger)" \
  init paylab keys create --merchant "$merchant" --name compose-check | awk 'NR == 1') # not head: it would break the pipe
case "$api_key" in plk_*) ;; *) fail "paylab keys create printed no key: $api_key" ;; esac

step "$payments payments to $merchant through http://$api"
pay() { # pay KEY: POST a payment; prints "status replayed id"
  local body headers
  body=$(mktemp) headers=$(mktemp)
  local code
  code=$(curl -sS -o "$body" -D "$headers" -w '%{http_code}' -X POST "http://$api/v1/payments" \
    -H "Authorization: Bearer $api_key" -H 'Content-Type: application/json' -H "Idempotency-Key: $1" \
    -d "{\"customer_id\":\"cus_check\",\"merchant_id\":\"$merchant\",\"amount\":$amount,\"currency\":\"EUR\"}")
  local replayed
  replayed=$(tr -d '\r' <"$headers" | awk -F': ' 'tolower($1) == "idempotency-replayed" {print $2}')
  echo "$code ${replayed:-false} $(jq -r '.id + " " + .status' "$body" 2>/dev/null || cat "$body")"
  rm -f "$body" "$headers"
}
first=""
for i in $(seq 1 "$payments"); do
  key="$merchant-$i"
  out=$(pay "$key")
  echo "  POST /v1/payments Idempotency-Key: $key -> $out"
  [ "${out%% *}" = 201 ] || fail "payment $key: $out"
  [ -n "$first" ] || first=$out
done
again=$(pay "$merchant-1")
echo "  POST /v1/payments Idempotency-Key: $merchant-1 (again) -> $again"
set -- $again
[ "$1" = 201 ] && [ "$2" = true ] && [ "$3" = "$(echo "$first" | cut -d' ' -f3)" ] ||
  fail "the replay of $merchant-1 is not the stored response: $again (first: $first)"

want=$((payments * amount))
step "the ledger books $want on merchant:$merchant, Mailpit holds $payments receipts"
deadline=$((SECONDS + wait_s))
balance="" receipts=""
while [ "$SECONDS" -lt "$deadline" ]; do
  balance=$(curl -sS -H "Authorization: Bearer $api_key" "http://$ledger/v1/accounts/merchant:$merchant" 2>/dev/null |
    jq -r '[.balances[]? | select(.currency == "EUR") | .balance] | first // empty' 2>/dev/null || true)
  receipts=$(curl -sS "http://$mailpit/api/v1/search?query=$(jq -rn --arg q 'subject:"Receipt for your payment"' '$q|@uri')" 2>/dev/null |
    jq -r '.messages_count // .total // empty' 2>/dev/null || true)
  if [ "${balance#-}" = "$want" ] && [ "${receipts:-0}" -ge "$payments" ]; then break; fi
  sleep 2
done
echo "  GET /v1/accounts/merchant:$merchant -> EUR balance ${balance:-none}"
echo "  Mailpit: ${receipts:-0} receipts"
[ "${balance#-}" = "$want" ] || fail "ledger balance ${balance:-none}, want $want"
[ "${receipts:-0}" -ge "$payments" ] || fail "${receipts:-0} receipts in Mailpit, want $payments"

step "the database roles: each service as its runtime role, no DDL, no other database"
# Who is connected to which database (the console and the host-side tools
# connect as the owners; the services never do).
psql_in() { # psql_in SERVICE ROLE PASSWORD DATABASE SQL: runs SQL as ROLE over TCP in SERVICE's container
  docker compose exec -T -e PGPASSWORD="$3" "$1" psql -h 127.0.0.1 -U "$2" -d "$4" -v ON_ERROR_STOP=1 -Atc "$5"
}
# The server that takes writes: postgres, or with compose.ha.yml the
# Patroni leader (a replica would refuse DDL for being read-only).
leader=""
for svc in $(docker compose config --services | grep -E '^postgres(-[0-9]+)?$'); do
  if [ "$(psql_in "$svc" postgres "${POSTGRES_PASSWORD:-dev-only-postgres}" postgres 'SELECT pg_is_in_recovery()' 2>/dev/null)" = f ]; then
    leader=$svc
    break
  fi
done
[ -n "$leader" ] || fail "no PostgreSQL server of the deployment takes writes"
echo "  the server taking writes: $leader"
psql_as() { psql_in "$leader" "$@"; } # psql_as ROLE PASSWORD DATABASE SQL
sessions=$(psql_as postgres "${POSTGRES_PASSWORD:-dev-only-postgres}" postgres \
  "SELECT datname || ' ' || usename FROM pg_stat_activity WHERE backend_type = 'client backend' AND datname IS NOT NULL GROUP BY 1 ORDER BY 1")
echo "$sessions" | sed 's/^/  session: /'
for want in "orders orders_api" "orders orders_relay" "ledger ledger_app" "notifications notifications_app"; do
  echo "$sessions" | grep -qx "$want" || fail "no session of ${want#* } on ${want% *}: the services do not connect as their runtime roles"
done
for c in "orders_api ${ORDERS_API_DB_PASSWORD:-dev-only-orders-api} orders ledger" \
  "orders_relay ${ORDERS_RELAY_DB_PASSWORD:-dev-only-orders-relay} orders ledger" \
  "ledger_app ${LEDGER_APP_DB_PASSWORD:-dev-only-ledger-app} ledger orders" \
  "notifications_app ${NOTIFICATIONS_APP_DB_PASSWORD:-dev-only-notifications-app} notifications orders"; do
  set -- $c
  if out=$(psql_as "$1" "$2" "$3" "CREATE TABLE compose_check_ddl (id int)" 2>&1); then
    fail "$1 created a table in $3: runtime roles must not run DDL"
  fi
  case "$out" in *"permission denied"*) ;; *) fail "$1's CREATE TABLE in $3 failed, but not for want of the privilege: $out" ;; esac
  echo "  $1 on $3: CREATE TABLE refused ($(echo "$out" | grep -o 'permission denied.*' | tr -d '"' | awk 'NR == 1'))"
  if out=$(psql_as "$1" "$2" "$4" "SELECT 1" 2>&1); then
    fail "$1 connected to $4, another service's database"
  fi
  echo "  $1 on $4: connection refused ($(echo "$out" | grep -o 'permission denied.*' | tr -d '"' | awk 'NR == 1'))"
done

step "docker compose up -d --wait --scale relay=3"
docker compose up -d --wait --wait-timeout "$wait_s" --scale relay=3
docker compose ps relay --format 'table {{.Name}}\t{{.Status}}'
relays=$(docker compose ps relay --format '{{.Health}}' | grep -c '^healthy$' || true)
[ "$relays" = 3 ] || fail "$relays healthy relays after --scale relay=3, want 3"

# --no-deps: the relays are already up; without it, run would bring the
# relay service back to the replica count of the compose file.
step "docker compose --profile chaos run --rm --no-deps chaos all --quick"
log=$(mktemp)
set +e
dc run --rm --no-deps chaos all --quick 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
[ "$rc" = 0 ] || fail "the chaos service exited $rc"
grep -q '^chaos: 3 relays at ' "$log" || fail "the chaos service did not find the 3 relays"
if grep -E '^  SKIP relay-(crash-after-publish|killed-holding-leases):' "$log"; then
  fail "a relay scenario was skipped"
fi
relays=$(docker compose ps relay --format '{{.Health}}' | grep -c '^healthy$' || true)
[ "$relays" = 3 ] || fail "$relays healthy relays after the chaos run, want 3"
rm -f "$log"
echo "what the chaos service killed, brought back by the restart policy:"
docker inspect -f '  {{.Name}} restarts={{.RestartCount}} {{.State.Status}} {{.State.Health.Status}}' \
  $(docker compose ps -q orders relay ledger notifications)

if docker compose config --services | grep -qx kafka-2; then
  step "the secured Kafka cluster, from the host: TestComposeClusterRefusesLive"
  command -v go >/dev/null || fail "go is not installed: the cluster's check is a Go test"
  docker compose logs --no-log-prefix init | grep '^ACLs ready' || fail "init created no ACLs"
  ca=$(mktemp)
  docker compose run --rm --no-deps -T --entrypoint cat kafka-tls /kafka-tls/ca.crt >"$ca" ||
    fail "could not read the CA of kafka-tls"
  kafka=""
  for node in kafka kafka-2 kafka-3; do kafka="$kafka${kafka:+,}$(published "$node" 29092)"; done
  echo "  brokers $kafka, CA $(head -c 27 "$ca")…"
  set +e
  PAYLAB_COMPOSE_KAFKA=$kafka PAYLAB_COMPOSE_KAFKA_CA=$ca \
    go test -count=1 -run '^TestComposeClusterRefusesLive$' -v ./internal/testkit/deploycheck/ 2>&1 | tail -20
  rc=${PIPESTATUS[0]}
  set -e
  [ "$rc" = 0 ] || fail "TestComposeClusterRefusesLive failed"
  rm -f "$ca"
fi

step "compose-check: OK"
