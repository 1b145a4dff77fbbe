// k6 load test: place payments at a constant arrival rate (an open model).
//
//   docker compose --profile load run --rm -e API_KEY="$PAYLAB_API_KEY" k6 run /scripts/payments.js
//   k6 run -e API_KEY="$PAYLAB_API_KEY" -e BASE_URL=http://127.0.0.1:8080 -e RATE=100 -e DURATION=1m k6/payments.js
//
// API_KEY is a merchant's API key (paylab init prints the demo merchant's);
// every payment is that merchant's. MERCHANT_ID, when set, is sent as the
// body's merchant_id (it must be the key's merchant). One key may send
// API_RATE_LIMIT requests per second (default 200).
import http from 'k6/http';
import { check } from 'k6';
import exec from 'k6/execution';

const BASE_URL = __ENV.BASE_URL || 'http://127.0.0.1:8080';
const RATE = parseInt(__ENV.RATE || '50', 10);
const DURATION = __ENV.DURATION || '1m';
const API_KEY = __ENV.API_KEY || '';
const MERCHANT_ID = __ENV.MERCHANT_ID || '';
const CURRENCIES = ['EUR', 'USD', 'GBP', 'JPY'];

export const options = {
  scenarios: {
    payments: {
      executor: 'constant-arrival-rate',
      rate: RATE,
      timeUnit: '1s',
      duration: DURATION,
      preAllocatedVUs: 20,
      maxVUs: 200,
    },
  },
  thresholds: {
    http_req_failed: ['rate<0.01'],
    http_req_duration: ['p(95)<250'],
    checks: ['rate>0.99'],
  },
};

// One run id for the whole test; with the global iteration number it makes
// every Idempotency-Key unique.
export function setup() {
  if (!API_KEY) {
    throw new Error('API_KEY is not set: pass a merchant API key with -e API_KEY=... (paylab init prints the demo key)');
  }
  return { run: `${Date.now()}-${Math.floor(Math.random() * 1e9)}` };
}

export default function (data) {
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
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}`, 'Idempotency-Key': `k6-${data.run}-${exec.scenario.iterationInTest}` },
    tags: { name: 'POST /v1/payments' },
  });
  check(res, {
    'status is 201': (r) => r.status === 201,
    'order is captured': (r) => r.status === 201 && r.json('status') === 'captured',
  });
}
