// k6 chaos run: payments at a constant rate while faults are flipped over the
// services' admin APIs and a relay is killed (compose brings it back).
//
//   docker compose --profile load run --rm -e API_KEY="$PAYLAB_API_KEY" k6 run /scripts/chaos.js
//
// API_KEY is a merchant's API key (paylab init prints the demo merchant's).
// It needs the deployment's chaos controls: CHAOS_ENABLED=true and a
// CHAOS_TOKEN of your own in .env (compose passes the token to k6).
//
// Afterwards, reconcile: paylab verify (docs/chaos.md, "Reconciling a running system").
import http from 'k6/http';
import { check, sleep } from 'k6';
import exec from 'k6/execution';

const BASE_URL = __ENV.BASE_URL || 'http://orders:8080';
const ORDERS_ADMIN = __ENV.ORDERS_ADMIN || 'http://orders:9080';
const RELAY_ADMIN = __ENV.RELAY_ADMIN || 'http://relay:9081';
const LEDGER_ADMIN = __ENV.LEDGER_ADMIN || 'http://ledger:9082';
const TOKEN = __ENV.CHAOS_TOKEN || '';
const RATE = parseInt(__ENV.RATE || '50', 10);
const API_KEY = __ENV.API_KEY || '';
const MERCHANT_ID = __ENV.MERCHANT_ID || '';
const CURRENCIES = ['EUR', 'USD', 'GBP', 'JPY'];

export const options = {
  scenarios: {
    payments: {
      executor: 'constant-arrival-rate',
      exec: 'payments',
      rate: RATE,
      timeUnit: '1s',
      duration: __ENV.DURATION || '2m',
      preAllocatedVUs: 20,
      maxVUs: 200,
    },
    chaos: {
      executor: 'shared-iterations',
      exec: 'chaos',
      vus: 1,
      iterations: 1,
      startTime: '10s',
    },
  },
  thresholds: {
    // Faults make some payments fail (503, or a connection cut by a crash);
    // the outbox guarantees are checked afterwards with paylab verify.
    'http_req_failed{scenario:payments}': ['rate<0.2'],
  },
};

export function setup() {
  if (!TOKEN) {
    throw new Error('CHAOS_TOKEN is not set: set CHAOS_ENABLED=true and CHAOS_TOKEN in .env, then docker compose up -d');
  }
  if (!API_KEY) {
    throw new Error('API_KEY is not set: pass a merchant API key with -e API_KEY=... (paylab init prints the demo key)');
  }
  return { run: `${Date.now()}-${Math.floor(Math.random() * 1e9)}` };
}

export function payments(data) {
  const payment = {
    customer_id: `cus_${Math.floor(Math.random() * 1000)}`,
    amount: 100 + Math.floor(Math.random() * 49900),
    currency: CURRENCIES[Math.floor(Math.random() * CURRENCIES.length)],
  };
  if (MERCHANT_ID) {
    payment.merchant_id = MERCHANT_ID; // else the key's merchant
  }
  const body = JSON.stringify(payment);
  const res = http.post(`${BASE_URL}/v1/payments`, body, {
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}`, 'Idempotency-Key': `k6-chaos-${data.run}-${exec.scenario.iterationInTest}` },
    tags: { name: 'POST /v1/payments' },
  });
  check(res, { 'captured or cleanly refused': (r) => r.status === 201 || r.status === 503 });
}

function arm(admin, point, fault) {
  const res = http.put(`${admin}/chaos/faults/${point}`, JSON.stringify(fault), {
    headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
    tags: { name: 'PUT /chaos/faults' },
  });
  check(res, { [`armed ${point}`]: (r) => r.status >= 200 && r.status < 300 });
}

function disarmAll(admin) {
  http.del(`${admin}/chaos/faults`, null, { headers: { Authorization: `Bearer ${TOKEN}` }, tags: { name: 'DELETE /chaos/faults' } });
}

export function chaos() {
  // 1. The API crashes after committing (compose restarts it): nothing is lost.
  arm(ORDERS_ADMIN, 'orders.after_commit_before_publish', { action: 'crash', count: 1 });
  sleep(15);
  // 2. A relay crashes between publishing and marking: duplicates on the wire.
  arm(RELAY_ADMIN, 'relay.after_publish_before_mark', { action: 'crash', count: 1 });
  sleep(15);
  // 3. Kill a relay outright while the other keeps publishing.
  http.post(`${RELAY_ADMIN}/chaos/kill`, null, { headers: { Authorization: `Bearer ${TOKEN}` }, tags: { name: 'POST /chaos/kill' } });
  sleep(15);
  // 4. The ledger crashes after applying, before committing its offset.
  arm(LEDGER_ADMIN, 'ledger.after_apply_before_offset_commit', { action: 'crash', count: 1 });
  sleep(15);
  // 5. Slow the API's commits for a while.
  arm(ORDERS_ADMIN, 'orders.before_commit', { action: 'delay', delay: '200ms', probability: 0.2 });
  sleep(20);
  for (const admin of [ORDERS_ADMIN, RELAY_ADMIN, LEDGER_ADMIN]) disarmAll(admin);
}
