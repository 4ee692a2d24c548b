// The operator console: one ES module, no build step, no dependency. It calls the public REST
// API with the operator's key, kept in sessionStorage (gone when the tab closes, never in a
// URL). Every value is put on the page as a text node or an attribute set by the DOM, never as
// HTML: metadata, ids and references are caller-controlled and render as the text they are.

const KEY = "wallet-ledger-key";
const main = document.getElementById("main");
const nav = document.getElementById("nav");

// ---- DOM ------------------------------------------------------------------------------------

/** An element with `attrs` (functions under `on...` become listeners) and text or node children. */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  return fill(el, attrs, children);
}

/** An SVG element, for charts. */
function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  return fill(el, attrs, children);
}

function fill(el, attrs, children) {
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "href") el.setAttribute("href", internal(value));
    else el.setAttribute(name, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Links stay inside the console: a value that is not a `#/...` route becomes `#/`. */
function internal(href) {
  return typeof href === "string" && href.startsWith("#/") ? href : "#/";
}

const seg = (value) => encodeURIComponent(value);
const link = (text, route) => h("a", { href: `#${route}` }, text);
const accountLink = (id) => link(id, `/accounts/${seg(id)}`);
const transactionLink = (id) => link(id, `/transactions/${seg(id)}`);
const time = (t) => (t ? new Date(t).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z") : "—");

function table(headers, rows) {
  return h("table", {},
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", {}, x)))),
    h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: headers.length, class: "muted" }, "none"))));
}

const row = (...cells) => h("tr", {}, cells.map((c) => (c instanceof Node && c.tagName === "TD" ? c : h("td", {}, c))));
const num = (value) => h("td", { class: "num" }, value);
const json = (value) => h("pre", {}, JSON.stringify(value, null, 2));

// ---- The API --------------------------------------------------------------------------------

/** One API call with the session's key: `{status, ok, data}`; a 401 logs out. */
async function api(method, path, body) {
  const headers = { authorization: `Bearer ${sessionStorage.getItem(KEY)}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(path, {
    method, headers, cache: "no-store",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await response.json(); } catch { /* an empty body */ }
  if (response.status === 401) {
    sessionStorage.removeItem(KEY);
    route();
  }
  return { status: response.status, ok: response.ok, data };
}

/** A problem answer as a line the operator can read: status, code and detail. */
function problem(r) {
  const p = r.data || {};
  const errors = (p.errors || []).map((e) => ` ${e.field}: ${e.code} (${e.message})`).join(";");
  const scope = r.status === 403 ? " — this key's scope does not allow it" : "";
  return h("p", { class: "error" }, `${r.status} ${p.code || ""}: ${p.detail || ""}${errors}${scope}`);
}

/** A button that asks first, then sends one idempotent request and shows the page again. */
function action(label, question, method, path, body) {
  return h("button", {
    type: "button",
    onclick: async (event) => {
      if (!window.confirm(question)) return;
      event.target.disabled = true;
      const r = await api(method, path, body);
      const outcome = r.ok && r.data && r.data.outcome ? `: ${r.data.outcome}` : "";
      flash = r.ok ? h("p", { class: "good" }, `${label}: done (${r.status}${outcome})`) : problem(r);
      route();
    },
  }, label);
}

let flash = null;

// ---- Pages ----------------------------------------------------------------------------------

async function dashboard() {
  const [runs, dead, pending, consumer] = await Promise.all([
    api("GET", "/v1/reconciliations?limit=1"),
    api("GET", "/v1/deliveries?status=dead&limit=500"),
    api("GET", "/v1/deliveries?status=pending&limit=500"),
    api("GET", "/v1/consumer"),
  ]);
  const count = (r) => (r.ok ? `${r.data.data.length}${r.data.next_cursor ? "+" : ""}` : "—");
  const last = runs.ok && runs.data.data[0];
  const partitions = consumer.ok ? consumer.data.partitions : [];
  const groups = partitions.flatMap((p) => p.groups.filter((g) => g.name === consumer.data.group));
  const sum = (values) => values.reduce((total, v) => total + (Number(v) || 0), 0);
  const cards = h("div", { class: "cards" },
    card("Failing deliveries", count(dead), link("see them", "/deliveries?status=dead"), dead),
    card("Deliveries waiting", count(pending), link("see them", "/deliveries?status=pending"), pending),
    card("Dead letters", consumer.ok ? sum(partitions.map((p) => p.dead_letters)) : "—", link("see them", "/dead-letters"), consumer),
    card("Consumer lag", consumer.ok ? sum(groups.map((g) => g.lag)) : "—",
      consumer.ok ? `not yet delivered; ${sum(groups.map((g) => g.pending))} pending` : "", consumer),
    card("Last reconciliation",
      last ? h("span", { class: last.clean ? "good" : "bad" }, last.clean ? "clean" : "exceptions") : "none",
      last ? link(`${last.provider}, ${time(last.created_at)}`, `/reconciliations/${seg(last.id)}`) : "", runs));
  return [h("h1", {}, "Dashboard"), cards, await volumes("hour", "minute"), await volumes("day", "hour")];
}

function card(title, figure, note, answer) {
  return h("div", { class: "card" }, h("div", { class: "muted" }, title),
    h("div", { class: "figure" }, figure), h("div", {}, note),
    answer && !answer.ok ? problem(answer) : null);
}

/** Posted and refused transactions per bucket over the window, and what moved per currency. */
async function volumes(window, bucket) {
  const title = h("h2", {}, `Last ${window}: transactions posted (blue) and refused (red) per ${bucket}`);
  const r = await api("GET", `/v1/stats/volumes?window=${window}&bucket=${bucket}`);
  if (!r.ok) return [title, problem(r)];
  const byStart = new Map();
  const byCurrency = new Map();
  for (const b of r.data.data) {
    const at = byStart.get(Date.parse(b.start)) || { posted: 0, refused: 0 };
    at.posted += b.posted_count;
    at.refused += b.refused_count;
    byStart.set(Date.parse(b.start), at);
    const c = byCurrency.get(b.currency) || { count: 0, refused: 0, amount: 0n, exponent: decimals(b.posted_amount_decimal) };
    c.count += b.posted_count;
    c.refused += b.refused_count;
    c.amount += BigInt(b.posted_amount);
    byCurrency.set(b.currency, c);
  }
  const slots = bucketStarts(r.data.from, r.data.to, bucket).map((start) => ({ start, ...(byStart.get(start) || { posted: 0, refused: 0 }) }));
  const totals = [...byCurrency].map(([currency, c]) => row(currency, num(c.count), num(minor(c.amount, c.exponent)), num(c.refused)));
  return [title, barChart(slots), table(["currency", "posted", "moved", "refused"], totals)];
}

/** How many decimals a `_decimal` string has: its currency's exponent. */
const decimals = (text) => (text.includes(".") ? text.length - text.indexOf(".") - 1 : 0);

/** Minor units as a decimal string with `exponent` places, exactly (BigInt, never a float). */
function minor(units, exponent) {
  const negative = units < 0n;
  const digits = (negative ? -units : units).toString().padStart(exponent + 1, "0");
  const whole = exponent ? `${digits.slice(0, -exponent)}.${digits.slice(-exponent)}` : digits;
  return negative ? `-${whole}` : whole;
}

/** Every bucket's start from `from` to `to`, in milliseconds. */
function bucketStarts(from, to, bucket) {
  const step = bucket === "minute" ? 60_000 : 3_600_000;
  const starts = [];
  for (let t = Date.parse(from); t <= Date.parse(to); t += step) starts.push(t);
  return starts;
}

function barChart(slots) {
  const [width, height] = [1100, 140];
  const most = Math.max(1, ...slots.map((b) => b.posted + b.refused));
  const step = width / Math.max(1, slots.length);
  const bars = slots.flatMap((b, i) => {
    const posted = (b.posted / most) * (height - 20);
    const refused = (b.refused / most) * (height - 20);
    return [
      svg("rect", { x: i * step + 1, y: height - posted, width: Math.max(1, step - 2), height: posted }),
      svg("rect", { class: "refused", x: i * step + 1, y: height - posted - refused, width: Math.max(1, step - 2), height: refused }),
    ];
  });
  return svg("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img" },
    svg("text", { x: 4, y: 12 }, `peak ${most}`), bars);
}

async function accounts(params) {
  const query = new URLSearchParams();
  for (const name of ["id_prefix", "type", "currency", "status", "cursor"]) {
    if (params.get(name)) query.set(name, params.get(name));
  }
  for (const line of (params.get("metadata") || "").split("\n")) {
    const at = line.indexOf("=");
    if (at > 0) query.append(`metadata[${line.slice(0, at).trim()}]`, line.slice(at + 1).trim());
  }
  const form = searchForm(params);
  if (![...query.keys()].length && !params.has("all")) {
    return [h("h1", {}, "Accounts"), form, h("p", { class: "muted" }, "Search by id prefix, type, currency, status or metadata.")];
  }
  const r = await api("GET", `/v1/accounts?${query}`);
  if (!r.ok) return [h("h1", {}, "Accounts"), form, problem(r)];
  const rows = r.data.data.map((a) => row(accountLink(a.id), a.type, a.currency, a.status,
    num(a.balances.posted_decimal), num(a.balances.available_decimal), JSON.stringify(a.metadata)));
  const next = r.data.next_cursor ? withParams(params, { cursor: r.data.next_cursor }) : null;
  return [h("h1", {}, "Accounts"), form,
    table(["id", "type", "currency", "status", "posted", "available", "metadata"], rows),
    next ? link("next page", `/accounts?${next}`) : null];
}

function withParams(params, changes) {
  const copy = new URLSearchParams(params);
  for (const [k, v] of Object.entries(changes)) copy.set(k, v);
  return copy.toString();
}

function searchForm(params) {
  const field = (label, name, input) => h("label", {}, label, input(name));
  const text = (name) => h("input", { name, value: params.get(name) || "" });
  const choice = (options) => (name) => {
    const select = h("select", { name }, options.map((o) => h("option", { value: o }, o || "any")));
    select.value = params.get(name) || "";
    return select;
  };
  const metadata = h("textarea", { name: "metadata", rows: 2, cols: 28, placeholder: "key=value or /json/pointer=value, one per line" });
  metadata.value = params.get("metadata") || "";
  return h("form", {
    class: "filters",
    onsubmit: (event) => {
      event.preventDefault();
      const values = new URLSearchParams();
      for (const [k, v] of new FormData(event.target)) if (v) values.set(k, v);
      if (![...values.keys()].length) values.set("all", "1");
      location.hash = `#/accounts?${values}`;
    },
  },
  field("id prefix", "id_prefix", text),
  field("type", "type", choice(["", "wallet", "system"])),
  field("currency", "currency", text),
  field("status", "status", choice(["", "active", "frozen", "closed"])),
  h("label", {}, "metadata", metadata),
  h("button", { type: "submit" }, "Search"));
}

async function account(id) {
  const [a, entries, holds] = await Promise.all([
    api("GET", `/v1/accounts/${seg(id)}`),
    api("GET", `/v1/accounts/${seg(id)}/entries?limit=100`),
    api("GET", `/v1/accounts/${seg(id)}/holds?limit=100`),
  ]);
  if (!a.ok) return [h("h1", {}, `Account ${id}`), problem(a)];
  const acc = a.data;
  const b = acc.balances;
  const lifecycle = acc.status === "active"
    ? action("Freeze", `Freeze ${id}? Debits will be refused until it is unfrozen.`, "POST", `/v1/accounts/${seg(id)}/freeze`, {})
    : acc.status === "frozen"
      ? action("Unfreeze", `Unfreeze ${id}?`, "POST", `/v1/accounts/${seg(id)}/unfreeze`, {})
      : null;
  return [
    h("h1", {}, `Account ${id} `, h("span", { class: acc.status === "active" ? "good" : "bad" }, acc.status), " ", lifecycle),
    h("dl", {}, h("dt", {}, "type"), h("dd", {}, acc.type), h("dt", {}, "currency"), h("dd", {}, acc.currency),
      h("dt", {}, "overdraft limit"), h("dd", {}, acc.overdraft_limit_decimal),
      h("dt", {}, "metadata"), h("dd", {}, json(acc.metadata))),
    h("h2", {}, "Balances"),
    table(["posted", "pending in", "pending out", "available"],
      [row(num(b.posted_decimal), num(b.pending_in_decimal), num(b.pending_out_decimal), num(b.available_decimal))]),
    h("h2", {}, "Balance history"), entries.ok ? balanceChart(entries.data.data) : problem(entries),
    h("h2", {}, "Open holds"), holds.ok ? holdsTable(holds.data.data) : problem(holds),
    h("h2", {}, "Entries (newest first)"), entries.ok ? entriesTable(entries.data.data) : null,
  ];
}

function balanceChart(entries) {
  const points = entries.filter((e) => e.balance_after !== null).reverse();
  if (points.length < 2) return h("p", { class: "muted" }, "Not enough wallet entries to draw (system accounts keep no running balance).");
  const [width, height] = [1100, 180];
  const values = points.map((e) => e.balance_after);
  const [low, high] = [Math.min(0, ...values), Math.max(...values)];
  const y = (v) => height - 10 - ((v - low) / Math.max(1, high - low)) * (height - 30);
  const x = (i) => 10 + (i / (points.length - 1)) * (width - 20);
  return svg("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img" },
    svg("line", { x1: 0, x2: width, y1: y(0), y2: y(0) }),
    svg("polyline", { points: values.map((v, i) => `${x(i)},${y(v)}`).join(" ") }),
    svg("text", { x: 4, y: 12 }, `${points[points.length - 1].balance_after_decimal} now; ${points.length} entries`));
}

function holdsTable(holds) {
  return table(["transaction", "legs", "expires", ""], holds.map((t) => row(
    transactionLink(t.id),
    t.entries.map((l) => `${l.account} ${l.amount_decimal}`).join(", "),
    time(t.expires_at),
    h("span", {},
      action("Capture", `Capture hold ${t.id} in full?`, "POST", `/v1/transactions/${seg(t.id)}/post`, {}), " ",
      action("Void", `Release hold ${t.id}?`, "POST", `/v1/transactions/${seg(t.id)}/void`, {})))));
}

function entriesTable(entries) {
  return table(["entry", "ledger time", "transaction", "amount", "balance after"], entries.map((e) => row(
    e.id, time(e.ledger_time), transactionLink(e.transaction_id),
    num(`${e.amount_decimal} ${e.currency}`), num(e.balance_after_decimal ?? "—"))));
}

async function transaction(id) {
  const r = await api("GET", `/v1/transactions/${seg(id)}`);
  if (!r.ok) return [h("h1", {}, `Transaction ${id}`), problem(r)];
  const t = r.data;
  const fields = [
    ["kind", t.kind], ["status", t.status], ["currency", t.currency],
    ["created", time(t.created_at)], ["posted (ledger time)", time(t.posted_at)],
    ["effective", time(t.effective_at)], ["expires", time(t.expires_at)],
    ["external ref", t.external_ref ?? "—"],
    ["reverses", t.reverses ? transactionLink(t.reverses) : "—"],
    ["refusal", t.refusal ? `${t.refusal.code}: ${t.refusal.detail}` : "—"],
    ["exchange", t.exchange ? `${t.exchange.amount_decimal} ${t.currency} → ${t.exchange.counter_amount_decimal} ${t.exchange.counter_currency} at ${t.exchange.rate}` : "—"],
  ];
  const holdActions = t.status === "pending" ? [
    action("Capture", `Capture hold ${t.id} in full?`, "POST", `/v1/transactions/${seg(t.id)}/post`, {}), " ",
    action("Void", `Release hold ${t.id}?`, "POST", `/v1/transactions/${seg(t.id)}/void`, {})] : [];
  const [reversals, events] = await Promise.all([
    api("GET", `/v1/transactions?reverses=${seg(t.id)}&limit=100`),
    api("GET", `/v1/transactions/${seg(t.id)}/events?limit=500`),
  ]);
  return [
    h("h1", {}, `Transaction ${id} `, holdActions),
    h("dl", {}, fields.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    h("h2", {}, "Status history"), table(["when", "status"], history(t)),
    h("h2", {}, t.status === "posted" ? "Entries" : "Legs"),
    table(["account", "amount", "currency"], t.entries.map((l) => row(accountLink(l.account), num(l.amount_decimal), l.currency || t.currency))),
    h("h2", {}, "Reversals"),
    reversals.ok ? table(["reversal", "status", "amount", "created"], reversals.data.data.map((r) => row(
      transactionLink(r.id), r.status, num(r.entries.filter((l) => l.amount > 0).map((l) => l.amount_decimal).join(", ")), time(r.created_at)))) : problem(reversals),
    outboxEvents(events),
    h("h2", {}, "Metadata"), json(t.metadata),
  ];
}

/** The transaction's outbox events, then their webhook deliveries (an admin key's view). */
function outboxEvents(r) {
  if (!r.ok) return [h("h2", {}, "Outbox events"), problem(r)];
  const events = r.data.data;
  const rows = events.map((e) => row(e.id, e.type, e.account_id ? accountLink(e.account_id) : "—", time(e.created_at),
    time(e.fanned_out_at), time(e.streamed_at), e.deliveries_total > e.deliveries.length
      ? link(`${e.deliveries.length} of ${e.deliveries_total}`, `/deliveries?event_id=${seg(e.id)}`) : num(e.deliveries_total)));
  const deliveries = events.flatMap((e) => e.deliveries.map((d) => deliveryRow(d, e.type)));
  return [h("h2", {}, "Outbox events"),
    table(["event", "type", "account", "written", "fanned out", "streamed", "deliveries"], rows),
    r.data.next_cursor ? h("p", { class: "muted" }, "More events than one page shows.") : null,
    h("h2", {}, "Webhook deliveries"),
    table(["delivery", "event", "status", "attempts", "last status", "last error", "next attempt", "url", ""], deliveries)];
}

/** A delivery that failed (dead, or retrying after an error) can be sent again at once. */
const failing = (d) => d.status === "dead" || (d.status === "pending" && d.last_error != null);

function deliveryRow(d, eventType) {
  return row(d.id, eventType, d.status, num(d.attempts), d.last_status ?? "—", d.last_error ?? "",
    time(d.next_attempt_at), d.url,
    failing(d) ? action("Resend", `Send delivery ${d.id} again?`, "POST", `/v1/deliveries/${seg(d.id)}/redeliver`, undefined) : "");
}

/** What a transaction went through, from the times it carries. */
function history(t) {
  const rows = [row(time(t.created_at), t.status === "rejected" ? "rejected" : t.expires_at ? "pending (a hold)" : "created")];
  if (t.posted_at) rows.push(row(time(t.posted_at), t.expires_at ? "captured: posted" : "posted"));
  if (t.status === "voided" || t.status === "expired") rows.push(row(t.status === "expired" ? time(t.expires_at) : "—", t.status));
  return rows;
}

async function deliveries(params) {
  const query = new URLSearchParams({ limit: "100" });
  for (const name of ["status", "event_id", "cursor"]) if (params.get(name)) query.set(name, params.get(name));
  const r = await api("GET", `/v1/deliveries?${query}`);
  const filters = h("p", {}, ["", "pending", "dead", "delivered", "cancelled"].map((s) => [link(s || "all", s ? `/deliveries?status=${s}` : "/deliveries"), " "]));
  if (!r.ok) return [h("h1", {}, "Webhook deliveries"), filters, problem(r)];
  const rows = r.data.data.map((d) => deliveryRow(d, d.event_type));
  return [h("h1", {}, "Webhook deliveries"), filters,
    table(["delivery", "event", "status", "attempts", "last status", "last error", "next attempt", "url", ""], rows)];
}

async function deadLetters(params) {
  const query = new URLSearchParams({ limit: "100" });
  for (const name of ["partition", "cursor"]) if (params.get(name)) query.set(name, params.get(name));
  const r = await api("GET", `/v1/dead-letters?${query}`);
  if (!r.ok) return [h("h1", {}, "Dead letters"), problem(r)];
  const rows = r.data.data.map((d) => {
    const path = `/v1/dead-letters/${d.partition}/${seg(d.id)}`;
    return row(d.stream, d.id, d.reason ?? "—", d.detail ?? "", (d.differing_fields || []).join(", "),
      num(d.failures ?? "—"), time(d.dead_lettered_at), json(d.event),
      h("span", {},
        action("Replay", `Replay dead letter ${d.id} (publish its event again)?`, "POST", `${path}/replay`, undefined), " ",
        action("Drop", `Drop dead letter ${d.id}? Its event will not be applied.`, "POST", `${path}/drop`, undefined)));
  });
  const next = r.data.next_cursor ? withParams(params, { cursor: r.data.next_cursor }) : null;
  return [h("h1", {}, "Dead letters"),
    table(["stream", "id", "reason", "detail", "differing fields", "failures", "dead-lettered", "event", ""], rows),
    next ? link("next page", `/dead-letters?${next}`) : null];
}

async function reconciliations() {
  const r = await api("GET", "/v1/reconciliations?limit=100");
  if (!r.ok) return [h("h1", {}, "Reconciliation runs"), problem(r)];
  const rows = r.data.data.map((run) => row(link(time(run.created_at), `/reconciliations/${seg(run.id)}`), run.provider,
    h("span", { class: run.clean ? "good" : "bad" }, run.clean ? "clean" : "exceptions"),
    run.summary ? `${run.summary.file_rows} lines, ${run.summary.ledger_payments} payments` : ""));
  return [h("h1", {}, "Reconciliation runs"), table(["run", "provider", "result", "compared"], rows)];
}

async function reconciliation(id) {
  const [run, exceptions] = await Promise.all([
    api("GET", `/v1/reconciliations/${seg(id)}`),
    api("GET", `/v1/reconciliations/${seg(id)}/exceptions?limit=500`),
  ]);
  if (!run.ok) return [h("h1", {}, `Reconciliation ${id}`), problem(run)];
  const rows = exceptions.ok ? exceptions.data.data.map((e) => row(e.code,
    e.payment_id ? transactionLink(e.payment_id) : "—", e.external_ref ?? "—", e.line ?? "—", e.reasons.join("; "))) : [];
  return [h("h1", {}, `Reconciliation ${run.data.provider}, ${time(run.data.created_at)}`),
    h("h2", {}, "Summary"), json(run.data.summary),
    h("h2", {}, "Exceptions"), exceptions.ok ? table(["code", "payment", "external ref", "line", "reasons"], rows) : problem(exceptions)];
}

// ---- Log in and routing ---------------------------------------------------------------------

function login() {
  const input = h("input", { type: "password", name: "key", autocomplete: "off", required: true });
  return h("form", {
    class: "login",
    onsubmit: (event) => {
      event.preventDefault();
      sessionStorage.setItem(KEY, input.value.trim());
      route();
    },
  }, h("h1", {}, "Log in"), h("label", {}, "API key", input),
  h("p", { class: "muted" }, "Kept in this tab's session only; every action is a request of the public API with this key, so it can do what the key's scope allows and nothing more."),
  h("button", { type: "submit" }, "Log in"));
}

const routes = [
  [/^\/?$/, () => dashboard()],
  [/^\/accounts$/, (_, params) => accounts(params)],
  [/^\/accounts\/(.+)$/, (m) => account(decodeURIComponent(m[1]))],
  [/^\/transactions\/(.+)$/, (m) => transaction(decodeURIComponent(m[1]))],
  [/^\/deliveries$/, (_, params) => deliveries(params)],
  [/^\/dead-letters$/, (_, params) => deadLetters(params)],
  [/^\/reconciliations$/, () => reconciliations()],
  [/^\/reconciliations\/(.+)$/, (m) => reconciliation(decodeURIComponent(m[1]))],
];

let shown = 0;

async function route() {
  const mine = ++shown;
  const signedIn = Boolean(sessionStorage.getItem(KEY));
  nav.hidden = !signedIn;
  if (!signedIn) {
    main.replaceChildren(login());
    return;
  }
  const [path, query = ""] = location.hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(query);
  const found = routes.find(([pattern]) => pattern.test(path));
  let content;
  try {
    content = found ? await found[1](path.match(found[0]), params) : [h("h1", {}, "Not found")];
  } catch (error) {
    content = [h("p", { class: "error" }, `The console could not load this page: ${error}`)];
  }
  if (mine !== shown) return;
  main.replaceChildren(...[flash, content].flat(Infinity).filter(Boolean));
  flash = null;
}

document.getElementById("logout").addEventListener("click", () => {
  sessionStorage.removeItem(KEY);
  location.hash = "#/";
  route();
});
window.addEventListener("hashchange", route);
route();
