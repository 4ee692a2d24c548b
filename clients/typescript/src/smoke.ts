/**
 * Smoke test of the TypeScript client against a running server:
 * `node dist/smoke.js URL TOKEN` with an admin key (scripts/clients.sh builds and runs it).
 * Compiling it is half the test: every request and answer below is checked against the
 * generated types.
 */
import { randomUUID } from "node:crypto";
import { createLedgerClient } from "./index.js";

function check(condition: boolean, what: string): asserts condition {
  if (!condition) {
    throw new Error(`typescript client: ${what}`);
  }
}

async function main(baseUrl: string, token: string): Promise<void> {
  const api = createLedgerClient(baseUrl, token);
  const run = randomUUID().slice(0, 8);
  const [a, b] = [`ts-${run}-a`, `ts-${run}-b`];
  for (const [id, metadata] of [[a, { customer: `ts-${run}` }], [b, {}]] as const) {
    const created = await api.POST("/v1/accounts", {
      body: { id, currency: "SAR", type: "wallet", metadata },
    });
    check(created.response.status === 201, `create ${id}: ${created.response.status}`);
  }
  const topUp = await api.POST("/v1/payments", {
    body: { id: randomUUID(), account: a, amount: 1000, currency: "SAR", provider: "smoke" },
  });
  check(topUp.response.status === 201, `top-up: ${topUp.response.status}`);

  const transfer = { id: randomUUID(), from: a, to: b, amount: 300 };
  const first = await api.POST("/v1/transfers", { body: transfer });
  check(first.response.status === 201 && first.data?.id === transfer.id, "transfer");
  const again = await api.POST("/v1/transfers", { body: transfer });
  check(
    again.response.status === 200 &&
      again.response.headers.get("Idempotent-Replayed") === "true" &&
      again.data?.id === transfer.id,
    `retry: ${again.response.status}`,
  );
  const wrong = await api.POST("/v1/transfers", { body: { ...transfer, amount: 301 } });
  check(wrong.response.status === 422 && wrong.error !== undefined, "mismatch");
  check(
    wrong.error.code === "idempotency_mismatch" &&
      JSON.stringify(wrong.error.differing_fields) === JSON.stringify(["/amount"]),
    `mismatch problem: ${JSON.stringify(wrong.error)}`,
  );

  // openapi-fetch writes an object query parameter as `metadata[customer]=...` (deepObject).
  const found = await api.GET("/v1/accounts", {
    params: { query: { metadata: { customer: `ts-${run}` } } },
  });
  check(
    JSON.stringify(found.data?.data.map((x) => x.id)) === JSON.stringify([a]),
    `search: ${JSON.stringify(found.error ?? found.data)}`,
  );
  check(found.data?.data[0]?.balances.posted === 700, "balance");
  console.log("typescript client: ok");
}

const [baseUrl, token] = process.argv.slice(2);
check(baseUrl !== undefined && token !== undefined, "usage: node dist/smoke.js URL TOKEN");
await main(baseUrl, token);
