// The ops dashboard: per event, the counters, sales over time, money in limbo (each class with
// its runbook), the ledger's lag, the measured late-capture-to-refund bound, and the admin actions
// of the API (open, close, correct stock, revoke a seat, retry a refund) with a confirmation.
// Reads only the public admin API, as the operator signed in through the identity provider
// (ADR 0050: a token with the admin claim, in this page's memory), or with the admin token the
// operator pastes, kept in sessionStorage (this tab only); sent as a bearer header, never in
// an address.

import { $, api, clockTime, duration, el, errorCode, money, randomKey, say } from "./common.js";
import { OidcSession } from "./oidc.js";

const TOKEN = "onsale.admin";
const ORDER_PAGES_MAX = 10; // 5,000 orders drawn at most
const board = { token: sessionStorage.getItem(TOKEN), eventId: null, timer: null, data: null,
  session: null };

// Each class of money in limbo, where the exceptions view lists it, and its runbook's anchor
// in docs/deploy.md (served at /ui/runbooks).
const LIMBO = [
  ["captured_without_seat", "Captured money without a seat", "runbook-captured-money-without-a-seat"],
  ["refunds_pending", "Refunds pending", "runbook-refunds-pending-or-retrying"],
  ["refunds_retrying", "Refunds retrying", "runbook-refunds-pending-or-retrying"],
  ["refunds_parked", "Refunds parked (the provider's records disagree)", "runbook-refund-parked"],
  ["seats_without_money", "Sold seats whose money left", "runbook-seat-without-money"],
  ["disputes", "Disputes", "runbook-dispute"],
  ["blocked_seats", "Blocked seats (payment in flight)", "runbook-blocked-seat"],
  ["charging_too_long", "Payments in flight too long", "runbook-payment-in-flight-too-long"],
  ["alerts", "Provider messages refused", "runbook-provider-message-refused"],
];

function call(path, options = {}) {
  return api(path, { token: board.token, ...options });
}

function confirmAction(text) {
  const dialog = $("confirm");
  $("confirm-text").textContent = text;
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "yes"), { once: true });
  });
}

// --- reading --------------------------------------------------------------------------------

function metric(text, name, eventId) {
  const line = text.split("\n").find((l) => l.startsWith(`${name}{event="${eventId}"}`));
  return line ? Number(line.split(" ").pop()) : null;
}

async function orders(eventId) {
  const out = [];
  let cursor = null;
  for (let n = 0; n < ORDER_PAGES_MAX; n++) {
    const q = cursor ? `&cursor=${encodeURIComponent(cursor)}` : "";
    const page = await call(`/v1/admin/events/${eventId}/orders?limit=500${q}`);
    if (page.status !== 200) break;
    out.push(...page.body.orders);
    cursor = page.body.next_cursor;
    if (!cursor) break;
  }
  return out;
}

async function load() {
  const e = encodeURIComponent(board.eventId);
  const [config, counts, limbo, metrics, sold, hooks] = await Promise.all([
    call(`/v1/admin/events/${e}`), call(`/v1/events/${e}`),
    call(`/v1/admin/events/${e}/exceptions`), call("/metrics"), orders(e),
    call("/v1/admin/webhooks/endpoints"),
  ]);
  if (config.status === 401) return askToken("That token was refused.");
  if (config.status !== 200) {
    say($("event-message"), `Cannot read ${board.eventId}: ${errorCode(config)}.`, "bad");
    return;
  }
  say($("event-message"), "");
  board.data = { config: config.body, counts: counts.body, limbo: limbo.body, orders: sold,
    metrics: metrics.status === 200 ? metrics.body : "", hooks };
  render();
  $("refreshed").textContent = `Updated ${new Date().toLocaleTimeString()}`;
}

// --- drawing --------------------------------------------------------------------------------

function kv(name, value) {
  return el("span", {}, `${name} `, el("b", { text: String(value ?? "–") }));
}

function renderCounters({ config, counts }) {
  const now = board.data.limbo.server_time_ms || Date.now();
  const t0 = config.opens_at_ms ? `${clockTime(config.opens_at_ms)}${
    config.opens_at_ms > now ? ` (in ${duration(config.opens_at_ms - now)})` : ""}` : "not set";
  $("counters").replaceChildren(kv("status", config.status), kv("T0", t0),
    ...["free", "held", "blocked", "sold"].map((k) => kv(k, counts[k])),
    kv("total", counts.seats_total));
  $("config").replaceChildren(kv("kind", config.kind), kv("policy", config.policy),
    kv("hold", duration(config.hold_ttl_ms)), kv("quarantine", duration(config.quarantine_ms)),
    kv("money leaving a sale", config.reversal_policy),
    kv("price", config.kind === "stock" ? "per SKU" : money(config.price_minor || 0, config.currency)));
  $("stock-form").hidden = config.kind !== "stock";
}

function renderSales(list, currency) {
  const points = list.map((o) => o.decided_ms).filter(Boolean).sort((a, b) => a - b);
  const total = list.reduce((sum, o) => sum + (o.amount || 0), 0);
  $("sales-summary").textContent = points.length
    ? `${points.length} ${points.length === 1 ? "order" : "orders"}, ${money(total, currency)}; first ${clockTime(points[0])}, last ${clockTime(points[points.length - 1])}.`
    : "No order yet.";
  const w = 300;
  const h = 100;
  const from = points[0] || 0;
  const span = Math.max(1, (points[points.length - 1] || 0) - from);
  const xy = points.map((t, i) => `${(((t - from) / span) * (w - 20) + 10).toFixed(1)},${(h - 10 - ((i + 1) / points.length) * (h - 20)).toFixed(1)}`);
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  svg.setAttribute("class", "chart");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", `Orders over time: ${points.length} in all`);
  const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
  line.setAttribute("points", points.length ? `10,${h - 10} ${xy.join(" ")}` : "");
  svg.append(line);
  $("sales-chart").replaceChildren(svg);
}

function renderLag({ config, metrics, limbo }) {
  const behind = metric(metrics, "onsale_ledger_behind_entries", board.eventId);
  const oldest = metric(metrics, "onsale_ledger_oldest_unmirrored_seconds", board.eventId);
  const rows = [
    ["Decisions not yet in the ledger", behind ?? "unknown"],
    ["Oldest of them waiting", oldest === null ? "unknown" : `${oldest.toFixed(1)} s`],
    ["Late-capture window (quarantine hard timeout)", duration(config.quarantine_ms)],
    ["Late payment policy", config.policy],
    ["Captures waiting for their refund", limbo.refunds_pending.length + limbo.refunds_retrying.length],
    ...refundTimeRows(limbo.refund_times),
  ];
  $("lag").replaceChildren(...rows.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { class: "big", text: String(v) })]));
}

// The measured late-capture-to-refund bound: how long charges that went REFUNDING took to be
// refunded, and how long the open ones have waited so far (the exceptions view's refund_times).
function refundTimeRows(t) {
  if (!t) return [];
  const ms = (v) => (v === null || v === undefined ? "–" : duration(v));
  return [
    ["Capture to refund, p50 / p99 / max", t.refunded
      ? `${ms(t.p50_ms)} / ${ms(t.p99_ms)} / ${ms(t.max_ms)} (${t.refunded} refunded)` : "none yet"],
    ["Refunds open, oldest waiting", t.waiting ? `${t.waiting}, ${ms(t.oldest_waiting_ms)}` : "none"],
    ["Late-capture-to-refund bound so far", ms(t.bound_ms)],
  ];
}

function chargeCells(c, currency) {
  return [c.charge_id, c.state, money(c.amount, currency), c.refund_attempts ?? "", c.reason || ""];
}

const HEADS = {
  charge: ["charge", "state", "amount", "refund tries", "reason"],
  refunds_retrying: ["charge", "state", "amount", "refund tries", "reason", ""],
  refunds_parked: ["charge", "state", "amount", "refund tries", "reason", ""],
  seats_without_money: ["hold", "seat", "login", "reason", ""],
  blocked_seats: ["hold", "seat", "state", "until", "charge"],
  alerts: ["alert", "reason", "at", "charge", "hold"],
};

function rowsOf(key, items, currency) {
  const now = board.data.limbo.server_time_ms;
  if (key === "seats_without_money") {
    return items.map((x) => [x.hold_id, x.seat_id, x.login, x.reason,
      el("button", { class: "danger", onclick: () => revoke(x), text: `Revoke ${x.seat_id}` })]);
  }
  if (key === "blocked_seats") {
    return items.map((x) => [x.hold_id, x.seat_id, x.state,
      `${clockTime(x.until_ms)} (in ${duration(x.until_ms - now)})`, x.charge_id || ""]);
  }
  if (key === "alerts") return items.map((x) => [x.alert_id, x.reason, clockTime(x.at_ms), x.charge_id || "", x.hold_id || ""]);
  if (key === "refunds_retrying" || key === "refunds_parked") {
    return items.map((c) => [...chargeCells(c, currency),
      el("button", { onclick: () => retryRefund(c, key), text: `Retry refund of ${c.charge_id}` })]);
  }
  return items.map((c) => chargeCells(c, currency));
}

function table(key, rows) {
  const head = HEADS[key] || HEADS.charge;
  return el("div", { class: "table-wrap" }, el("table", {},
    el("thead", {}, el("tr", {}, ...head.map((h) => el("th", { scope: "col", text: h })))),
    el("tbody", {}, ...rows.map((r) => el("tr", {}, ...r.map((c) => el("td", {}, c)))))));
}

function renderLimbo({ limbo, config }) {
  const parts = LIMBO.map(([key, title, anchor]) => {
    const items = limbo[key] || [];
    const pill = el("span", { class: `pill ${items.length ? "bad" : "ok"}`, text: String(items.length) });
    const link = el("a", { href: `/ui/runbooks#${anchor}`, text: "runbook" });
    const section = el("section", { class: `limbo ${key}`, "data-count": String(items.length) },
      el("h3", {}, `${title} `, pill, " · ", link));
    if (items.length) section.append(table(key, rowsOf(key, items, config.currency)));
    return section;
  });
  $("limbo").replaceChildren(...parts);
}

// An endpoint is failing when it is disabled, a delivery gave up, or its oldest pending one
// has waited long after a refused attempt (docs/deploy.md "Runbook: merchant webhook failing").
const HOOK_WAIT_MS = 60_000;

function hookFailing(e) {
  const d = e.deliveries;
  return !e.enabled || d.failed > 0 || (d.pending > 0 && d.last_status !== 200
    && d.oldest_pending_ms > HOOK_WAIT_MS);
}

function renderHooks({ hooks }) {
  const link = el("a", { href: "/ui/runbooks#runbook-merchant-webhook-failing", text: "runbook" });
  if (hooks.status !== 200) {
    const why = errorCode(hooks) === "webhooks_unavailable"
      ? "The webhook log is in the ledger database, which this API cannot reach or has not configured."
      : `Cannot read the endpoints: ${errorCode(hooks)}.`;
    $("hooks").replaceChildren(el("p", { class: "muted", text: why }));
    return;
  }
  const endpoints = hooks.body.endpoints;
  const failing = endpoints.filter(hookFailing);
  const pill = el("span", { class: `pill ${failing.length ? "bad" : "ok"}`, text: String(failing.length) });
  const head = el("p", {}, `${endpoints.length} endpoint(s), failing `, pill, " · ", link);
  const rows = endpoints.map((e) => {
    const d = e.deliveries;
    const last = d.last_status || d.last_error ? `${d.last_status ?? "no answer"} ${d.last_error ?? ""}` : "";
    return [e.url, hookFailing(e) ? "failing" : "ok", e.enabled ? "enabled" : `disabled (${e.disabled_reason})`,
      String(d.failed), String(d.pending), d.pending ? duration(d.oldest_pending_ms) : "", last.trim()];
  });
  const heads = ["endpoint", "health", "state", "failed", "pending", "oldest pending", "last answer"];
  const grid = el("div", { class: "table-wrap" }, el("table", { id: "hooks-table" },
    el("thead", {}, el("tr", {}, ...heads.map((h) => el("th", { scope: "col", text: h })))),
    el("tbody", {}, ...rows.map((r) => el("tr", { class: r[1] }, ...r.map((c) => el("td", {}, c)))))));
  $("hooks").replaceChildren(head, ...(endpoints.length ? [grid] : []));
}

function render() {
  const d = board.data;
  $("event-view").hidden = false;
  renderCounters(d);
  renderSales(d.orders, d.config.currency);
  renderLag(d);
  renderLimbo(d);
  renderHooks(d);
}

// --- acting ---------------------------------------------------------------------------------

async function act(question, path, body) {
  if (!(await confirmAction(question))) {
    say($("action-message"), "Nothing done.");
    return;
  }
  const answer = await call(path, { method: "POST", body });
  say($("action-message"), answer.status < 300 ? `Done: ${JSON.stringify(answer.body)}`
    : `Refused: ${errorCode(answer)}.`, answer.status < 300 ? "ok" : "bad");
  load();
}

function revoke(x) {
  const e = encodeURIComponent(board.eventId);
  act(`Take seat ${x.seat_id} back from hold ${x.hold_id} and put it on sale again?`,
    `/v1/admin/events/${e}/holds/${encodeURIComponent(x.hold_id)}/revoke`, {});
}

function retryRefund(c, key) {
  const e = encodeURIComponent(board.eventId);
  const why = key === "refunds_parked"
    ? "It was parked because the provider's records disown it: the provider is asked again first."
    : `It has failed ${c.refund_attempts} time(s) and waits for its next try.`;
  act(`Retry the refund of ${c.charge_id} now? ${why}`, `/v1/admin/events/${e}/refunds/retry`,
    { charge_id: c.charge_id });
}

function wireActions() {
  const e = () => encodeURIComponent(board.eventId);
  $("open-sale").addEventListener("click", () => act(`Open the sale of ${board.eventId} now?`,
    `/v1/admin/events/${e()}/open`, {}));
  $("close-sale").addEventListener("click", () => act(
    `Close the sale of ${board.eventId}? No new holds or payments; this cannot be undone.`,
    `/v1/admin/events/${e()}/close`, {}));
  $("stock-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const body = { correction_id: randomKey(), sku: $("sku").value, location: $("location").value,
      set: Number($("stock-set").value), reason: $("reason").value };
    act(`Set ${body.sku} at ${body.location} to ${body.set} on hand?`,
      `/v1/admin/events/${e()}/stock/corrections`, body);
  });
}

// --- start ----------------------------------------------------------------------------------

function askToken(why = "") {
  sessionStorage.removeItem(TOKEN);
  board.token = null;
  $("token-panel").hidden = false;
  $("event-panel").hidden = true;
  $("event-view").hidden = true;
  $("forget").hidden = true;
  say($("token-message"), why, why ? "bad" : "");
}

async function events() {
  const answer = await call("/v1/admin/events?limit=100");
  if (answer.status === 401 && board.session) {
    return askToken("This account is not an operator's: it has no admin claim.");
  }
  if (answer.status === 401) return askToken("That token was refused.");
  $("token-panel").hidden = true;
  $("event-panel").hidden = false;
  $("forget").hidden = false;
  const ids = answer.status === 200 ? answer.body.events.map((x) => x.event_id) : [];
  const asked = new URLSearchParams(location.search).get("event");
  if (asked && !ids.includes(asked)) ids.unshift(asked);
  $("event-select").replaceChildren(...ids.map((id) => el("option", { value: id, text: id })));
  if (ids.length) {
    $("event-select").value = asked || ids[0];
    choose($("event-select").value);
  } else say($("event-message"), "No event yet.");
}

function choose(eventId) {
  board.eventId = eventId;
  clearInterval(board.timer);
  load();
  board.timer = setInterval(() => { if ($("auto").checked) load(); }, 5000);
}

// Sign-in through the identity provider, when the API names one (ADR 0050): back from it with
// a code, or silently once per tab, else a button.
async function signInThroughProvider() {
  const config = await api("/v1/auth/config");
  const oidc = config.status === 200 ? config.body.oidc : null;
  if (!oidc) return false;
  board.session = new OidcSession(oidc, (token) => { board.token = token; });
  $("provider-sign-in").hidden = false;
  $("provider-sign-in").addEventListener("click", () => board.session.begin());
  try {
    const me = await board.session.complete();
    if (me) {
      $("refreshed").textContent = `signed in as ${me.login}`;
      events();
      return true;
    }
  } catch (err) {
    askToken(String(err.message || err));
    return true;
  }
  if (!sessionStorage.getItem("onsale.oidc.silent")) {
    sessionStorage.setItem("onsale.oidc.silent", "1");
    await board.session.begin({ silent: true });
    return true;
  }
  return false;
}

async function main() {
  $("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    board.token = $("token").value.trim();
    $("token").value = "";
    sessionStorage.setItem(TOKEN, board.token);
    events();
  });
  $("forget").addEventListener("click", () => askToken());
  $("event-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    choose($("event-select").value);
  });
  wireActions();
  if (board.token) return events();
  if (await signInThroughProvider()) return undefined;
  return askToken();
}

main();
