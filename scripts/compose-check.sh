#!/usr/bin/env bash
# compose-check: docker-compose.yml for real, end to end, on a Docker engine.
#
#   make compose-check
#
# Builds the images, brings the whole deployment up and waits for its health
# checks, places payments through the orders API (one of them replayed by its
# Idempotency-Key), waits for the ledger to book them and Mailpit to hold the
# receipts, scales the relays to three, runs the chaos service's quick set
# inside the compose network (every relay found by name; the deployment runs
# with CHAOS_ENABLED=true and a fresh CHAOS_TOKEN), and takes it all down
# again (`down -v`), also when a step fails.
#
# Needs a Docker engine with compose v2 and buildx, able to build or pull the
# images docker-compose.yml and the Dockerfile name, plus curl and jq. It is
# not part of make test (no Docker engine in CI).
#
# Settings (the environment):
#   COMPOSE_PROJECT_NAME  the project (default paylab-check, so a `docker
#                         compose up` of the default project is left alone)
#   COMPOSE_FILE          compose's own list of files, ':'-separated, e.g.
#                         docker-compose.yml:ports-override.yml to publish
#                         PostgreSQL and Kafka elsewhere when make env-up's
#                         servers hold 55432/59092
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

step "an API key of $merchant (paylab keys create, in the init image)"
# init printed the demo merchant's key; the check pays to a merchant of its
# own, whose key it creates as the databases' owners do.
docker compose logs --no-log-prefix init | grep -q '^PAYLAB_API_KEY=plk_' || fail "init printed no demo API key"
api_key=$(docker compose run --rm --no-deps -T \
  -e ORDERS_DATABASE_URL="postgres://orders:${ORDERS_DB_PASSWORD:-orders}@postgres:5432/orders?sslmode=disable" \
  -e LEDGER_DATABASE_URL="postgres://ledger:${LEDGER_DB_PASSWORD:-ledger}@postgres:5432/ledger?sslmode=disable" \
  init paylab keys create --merchant "$merchant" --name compose-check | head -1)
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

step "compose-check: OK"
