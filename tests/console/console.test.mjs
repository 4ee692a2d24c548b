// The console in a real browser (Debian's Chromium through playwright-core), against a running
// `serve` (scripts/console.sh starts one): log in with a key, find a wallet by metadata, read
// its balances and compare them with the API, capture a hold, see caller-controlled text that
// looks like HTML render as text, and take a screenshot of each page into $OUT.
//
// Env: BASE (the server), TOKEN (an admin key), OUT (a folder for the screenshots),
// CHROMIUM (default /usr/bin/chromium). The server's stream holds one dead letter, 1-1, and a
// dispatcher sends webhooks to 127.0.0.1:9, where nothing listens, once each.

import { chromium } from "playwright-core";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";

const { BASE, TOKEN, OUT } = process.env;
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";

async function api(method, path, body) {
  const response = await fetch(BASE + path, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json().catch(() => null);
  assert.ok(response.ok, `${method} ${path}: ${response.status} ${JSON.stringify(data)}`);
  return data;
}

// What a hostile caller can store: markup in metadata values, keys and external references.
const SCRIPT = "<script>window.__pwned = 'script'</script>";
const ATTRIBUTE = "\"><img src=x onerror=\"window.__pwned='img'\">";

async function seed() {
  // Before the transactions, so that each of their events gets a delivery. Nothing listens on
  // port 9: scripts/console.sh's dispatcher (one attempt allowed) records each delivery dead.
  await api("POST", "/v1/webhooks", { id: randomUUID(), url: "http://127.0.0.1:9/hook" });
  const metadata = { customer: "c-7", note: SCRIPT, [ATTRIBUTE]: ATTRIBUTE };
  await api("POST", "/v1/accounts", { id: "alice", currency: "SAR", type: "wallet", metadata });
  await api("POST", "/v1/accounts", { id: "bob", currency: "SAR", type: "wallet", metadata: { customer: "c-8" } });
  const payment = randomUUID();
  await api("POST", "/v1/payments", { id: payment, account: "alice", amount: 10000, currency: "SAR", provider: "moyasar", external_ref: ATTRIBUTE });
  await api("POST", "/v1/transfers", { id: randomUUID(), from: "alice", to: "bob", amount: 2500 });
  const hold = randomUUID();
  await api("POST", "/v1/transfers", { id: hold, from: "alice", to: "bob", amount: 1500, status: "pending" });
  return { payment, hold };
}

async function shot(page, name) {
  await page.screenshot({ path: `${OUT}/${name}.png`, fullPage: true });
}

/** The text of the table cell under `header` in the first body row of the table after `title`. */
async function cell(page, title, header) {
  const table = page.locator(`h2:has-text("${title}") + table`);
  const headers = await table.locator("th").allTextContents();
  return table.locator("tbody tr").first().locator("td").nth(headers.indexOf(header)).textContent();
}

/** The texts of the column under `header` of the table after `title`, one per body row. */
async function column(page, title, header) {
  const table = page.locator(`h2:has-text("${title}") + table`);
  const headers = await table.locator("th").allTextContents();
  return table.locator(`tbody tr td:nth-child(${headers.indexOf(header) + 1})`).allTextContents();
}

/** `probe()` until it answers something, for up to 30 s. */
async function eventually(what, probe) {
  for (let i = 0; i < 300; i++) {
    const answer = await probe();
    if (answer) return answer;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`not within 30 s: ${what}`);
}

async function main() {
  const { payment, hold } = await seed();
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const violations = [];
  page.on("console", (m) => { if (/Content Security Policy/.test(m.text())) violations.push(m.text()); });
  page.on("dialog", (dialog) => dialog.accept());

  // The page itself: strict CSP, and no key in any URL it loads.
  const response = await page.goto(`${BASE}/console`);
  assert.match(response.headers()["content-security-policy"], /script-src 'self';/);
  await shot(page, "login");
  await page.fill("input[name=key]", TOKEN);
  await page.click("button[type=submit]");
  await page.waitForSelector("h1:has-text('Dashboard')");

  // Find the wallet by metadata, open it, and read what the API reads.
  await page.click("nav >> text=Accounts");
  await page.fill("textarea[name=metadata]", "customer=c-7");
  await page.click("button:has-text('Search')");
  await page.waitForSelector("table >> text=alice");
  assert.equal(await page.locator("tbody tr").count(), 1, "only alice has customer c-7");
  await shot(page, "accounts");
  await page.click("tbody >> text=alice");
  await page.waitForSelector("h1:has-text('Account alice')");
  const before = await api("GET", "/v1/accounts/alice");
  assert.equal(await cell(page, "Balances", "available"), before.balances.available_decimal);
  assert.equal(await cell(page, "Balances", "pending out"), "15.00");

  // Markup stored by a caller is text on the page, never markup (metadata shows as JSON, so
  // the quotes in a value show escaped).
  const text = await page.locator("main").textContent();
  const asJson = JSON.stringify(ATTRIBUTE).slice(1, -1);
  assert.ok(text.includes(SCRIPT) && text.includes(asJson), "the stored markup shows as text");
  assert.equal(await page.locator("main img, main script").count(), 0, "no element came from a value");
  await shot(page, "account");

  // Capture the hold from the account page: confirmed, then the page shows what the API says.
  await page.click(`tr:has-text("${hold}") >> button:has-text('Capture')`);
  await page.waitForSelector("text=Capture: done");
  const after = await api("GET", "/v1/accounts/alice");
  assert.equal((await api("GET", `/v1/transactions/${hold}`)).status, "posted");
  assert.equal(after.balances.posted, before.balances.posted - 1500);
  assert.equal(await cell(page, "Balances", "posted"), after.balances.posted_decimal);
  assert.equal(await cell(page, "Balances", "pending out"), "0.00");

  // The payment's page: its external reference, markup again, is text; its outbox event and
  // the event's failed delivery as the API lists them, resent from the page.
  const events = await eventually(`the payment's delivery is dead`, async () => {
    const page = await api("GET", `/v1/transactions/${payment}/events`);
    return page.data[0]?.deliveries[0]?.status === "dead" ? page.data : null;
  });
  await page.goto(`${BASE}/console#/transactions/${payment}`);
  await page.waitForSelector("h1:has-text('Transaction')");
  assert.ok((await page.locator("main").textContent()).includes(ATTRIBUTE));
  assert.equal(await page.locator("main img").count(), 0);
  assert.deepEqual(await column(page, "Outbox events", "event"), events.map((e) => e.id));
  assert.deepEqual(await column(page, "Outbox events", "type"), ["transaction.posted"]);
  const delivery = events[0].deliveries[0];
  assert.equal(await cell(page, "Webhook deliveries", "delivery"), delivery.id);
  assert.equal(await cell(page, "Webhook deliveries", "status"), "dead");
  assert.equal(await cell(page, "Webhook deliveries", "last error"), delivery.last_error);
  await shot(page, "transaction");
  await page.click(`tr:has-text("${delivery.id}") >> button:has-text('Resend')`);
  await page.waitForSelector("text=Resend: done (200)");
  const resent = await api("GET", `/v1/deliveries/${delivery.id}`);
  assert.ok(resent.updated_at > delivery.updated_at, "the API shows the delivery restarted");

  // The seeded dead letter (scripts/console.sh): shown with its reason, replayed once from
  // the page, after which the API lists none and says a second replay is a no-op.
  await page.goto(`${BASE}/console#/dead-letters`);
  await page.waitForSelector("tr:has-text('1-1') >> text=unknown_account");
  await shot(page, "dead-letters");
  await page.click("tr:has-text('1-1') >> button:has-text('Replay')");
  await page.waitForSelector("text=Replay: done (200: replayed)");
  assert.equal((await api("GET", "/v1/dead-letters")).data.length, 0);
  const again = await api("POST", "/v1/dead-letters/0/1-1/replay");
  assert.equal(again.outcome, "already_replayed");
  assert.equal(await page.locator("tbody tr:has-text('1-1')").count(), 0, "the page lists it no more");

  for (const [route, name, heading] of [
    ["#/", "dashboard", "Dashboard"],
    ["#/deliveries", "deliveries", "Webhook deliveries"],
    ["#/reconciliations", "reconciliations", "Reconciliation runs"],
  ]) {
    await page.goto(`${BASE}/console${route}`);
    await page.waitForSelector(`h1:has-text('${heading}')`);
    await shot(page, name);
  }

  assert.equal(await page.evaluate(() => window.__pwned), undefined, "no injected script ran");
  assert.deepEqual(violations, [], "the console itself needs nothing the CSP forbids");
  await browser.close();
  console.log("console: logged in, found alice by metadata, matched the API, captured a hold, showed a transaction's events and resent its delivery, replayed a dead letter, rendered markup as text");
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
