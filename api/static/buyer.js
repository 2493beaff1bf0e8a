// The buyer's page: sign in (through the identity provider, ADR 0050, or the demo's name
// login), the seat map with live availability, a
// countdown to T0 by the server's clock, picking seats or the best n together, the hold's
// countdown, paying through the provider, and the hold's truthful end. Everything goes through
// the public API with the buyer's own token. Two tabs of one browser share the token and the
// current hold (localStorage): a claim in one tab replaces the other's hold, and both say so.
// An event with a waiting room (ADR 0029) shows its queue instead of the map until the buyer's
// place is admitted; the claims then carry the admission. Before T0, in a presale window (ADR
// 0049), the page asks for an access code and its claims carry it.

import {
  $, api, clockTime, duration, el, errorCode, money, randomKey, say, ServerClock,
} from "./common.js";
import { has, lang, languages, loadStrings, switchTo, t } from "./i18n.js";
import { OidcSession } from "./oidc.js";
import { LiveSeats, SeatMap } from "./seatmap.js";

const PARTY_MAX = 6;
// Read again once back from the identity provider (the address it came back to has no query).
let eventId = new URLSearchParams(location.search).get("event");
let base = `/v1/events/${encodeURIComponent(eventId || "")}`;
const clock = new ServerClock();
const page = { me: null, event: null, map: null, live: null, hold: null, picked: new Set(),
  pollTimer: null, payKey: null, payNote: "", payment: null, queue: null, mapOpening: false,
  title: document.title, presales: [] };

const tokenKey = () => `onsale.buyer.${eventId}`;
const holdKey = () => `onsale.hold.${eventId}.${page.me.login}`;

// A refused claim in the buyer's words (strings.json `claim.<code>`), or null for a code it
// has no words for.
const claimError = (code) => (has(`claim.${code}`) ? t(`claim.${code}`) : null);

// How an event's money and dates are written: in its locale when it names one (de-DE), else
// as the page's language writes them (ADR 0046).
const localeOf = (ev) => ev?.locale || lang;
const cash = (minor, currency) => money(minor, currency, localeOf(page.event));

function show(id, visible = true) { $(id).hidden = !visible; }

function signIn() {
  show("login-panel");
  $("login-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const login = $("login-name").value.trim();
    const answer = await api("/v1/login", { method: "POST", body: { login, event_id: eventId } });
    if (answer.status !== 200) {
      say($("login-message"), t("login.refused", { code: errorCode(answer) }), "bad");
      return;
    }
    page.me = { login, token: answer.body.token };
    localStorage.setItem(tokenKey(), JSON.stringify(page.me));
    show("login-panel", false);
    start();
  });
}

function signOut() {
  localStorage.removeItem(tokenKey());
  if (page.session) { // no silent sign-in on the reload: the buyer asked to leave
    page.session.signOut();
    sessionStorage.setItem(SILENT, "1");
  }
  location.reload();
}

// Through the identity provider (ADR 0050): back from it with a code; else silently, once per
// tab while the provider may still have a session; else its button. The token stays in memory.
const SILENT = "onsale.oidc.silent";

async function signInThroughProvider(oidc) {
  page.session = new OidcSession(oidc);
  let me = null;
  try {
    me = await page.session.complete();
  } catch (err) {
    say($("login-message"), t("login.provider_failed", { why: String(err.message || err) }), "bad");
  }
  eventId = new URLSearchParams(location.search).get("event");
  base = `/v1/events/${encodeURIComponent(eventId || "")}`;
  if (me) {
    sessionStorage.removeItem(SILENT);
    const session = page.session;
    page.me = { login: me.login, get token() { return session.access; } };
    return true;
  }
  if (eventId && !sessionStorage.getItem(SILENT)) {
    sessionStorage.setItem(SILENT, "1");
    await page.session.begin({ silent: true });
    return "away";
  }
  return false;
}

function offerProvider() {
  show("login-panel");
  show("login-form", false);
  show("login-help", false);
  show("provider-sign-in");
  $("provider-sign-in").addEventListener("click", () => page.session.begin());
}

// --- the event and its seats --------------------------------------------------------------

function onSeats(data) {
  page.event = data;
  page.map?.setStates(data.states);
  renderEvent();
}

function onChange(data) {
  page.event = { ...page.event, ...data };
  page.map?.applyChanges(data.changes);
  renderEvent();
}

// The presale window open now, before T0 (ADR 0049), or null.
function presaleNow(now) {
  const ev = page.event;
  if (!ev || ev.status !== "open" || now >= ev.opens_at_ms) return null;
  return page.presales.find((w) => w.opens_at_ms <= now && now < w.closes_at_ms) || null;
}

async function loadPresales() {
  const answer = await api(`${base}/presales`);
  page.presales = answer.status === 200 ? answer.body.presales : [];
}

function saleText(ev, now) {
  const sale = t("sale.label");
  if (!ev) return [sale, "…"];
  if (ev.recovering) return [sale, t("sale.recovering")];
  if (ev.status === "draft") return [sale, t("sale.not_yet")];
  if (ev.status === "closed" || ev.status === "cancelled") return [sale, t(`sale.${ev.status}`)];
  if (presaleNow(now)) return [t("presale.on"), duration(ev.opens_at_ms - now)];
  if (now < ev.opens_at_ms) return [t("sale.opens_in"), duration(ev.opens_at_ms - now)];
  return [sale, ev.free > 0 ? t("sale.on") : t("sale.sold_out")];
}

function onSale() {
  const ev = page.event;
  const now = clock.now();
  return Boolean(ev) && ev.status === "open" && !ev.recovering
    && (now >= ev.opens_at_ms || Boolean(presaleNow(now)));
}

// A claim may be sent: the sale is on, and the event has no waiting room or the buyer's turn
// has come (a waiting, sold-out, used or lapsed place sends none).
function canClaim() {
  return onSale() && (!page.queue || Boolean(turn()));
}

function renderEvent() {
  const ev = page.event;
  if (!ev) return;
  show("sale-panel");
  if (ev.name) { // the event as people know it (ADR 0041)
    $("title").textContent = ev.name;
    if (page.title !== ev.name) document.title = page.title = ev.name;
    $("event-about").textContent = [ev.venue, showTime(ev)].filter(Boolean).join(" · ");
  }
  $("price").textContent = cash(ev.price_minor, ev.currency);
  $("sale-status").textContent = has(`status.${ev.status}`) ? t(`status.${ev.status}`) : ev.status;
  $("counts").replaceChildren(
    ...["free", "held", "blocked", "sold"].map((k) => el("span", {}, `${t(`counts.${k}`)} `,
      el("b", { text: String(ev[k]) }))),
  );
  $("best-n").max = String(ev.max_party || PARTY_MAX);
  renderPicked();
}

function tick() {
  const [label, text] = saleText(page.event, clock.now());
  $("countdown-label").textContent = label;
  $("countdown").textContent = text;
  const can = canClaim();
  $("hold-best").disabled = !can;
  $("hold-picked").disabled = !can || page.picked.size === 0;
  show("code-row", Boolean(presaleNow(clock.now())));
  renderHoldClock();
  renderQueueClock();
}

function toggle(seatId, state) {
  if (page.picked.has(seatId)) page.picked.delete(seatId);
  else if (state !== "F") {
    say($("claim-message"), t("map.not_free", { seat: seatId }), "warn");
    return;
  } else if (page.picked.size >= ((page.event && page.event.max_party) || PARTY_MAX)) {
    say($("claim-message"), t("map.too_many"), "warn");
    return;
  } else page.picked.add(seatId);
  page.map.setSelected(page.picked);
  renderPicked();
}

// What these seats cost: each its level's price (ADR 0038), else the event's.
function priceOf(ids) {
  const levels = (page.layout && page.layout.price_levels) || {};
  const levelOf = page.levelOf || new Map();
  return ids.reduce((sum, id) => sum + (levels[levelOf.get(id)] ?? page.event.price_minor), 0);
}

function renderPicked() {
  // A picked seat someone else took since is dropped from the pick, saying so.
  for (const id of [...page.picked]) {
    if (page.map.stateOf(id) === "F") continue;
    page.picked.delete(id);
    say($("claim-message"), t("map.taken", { seat: id }), "bad");
  }
  page.map.setSelected(page.picked);
  const ids = [...page.picked];
  const cost = ids.length && page.event ? ` · ${cash(priceOf(ids), page.event.currency)}` : "";
  $("picked").textContent = ids.length ? t("map.picked", { ids: ids.join(", "), cost })
    : t("map.none_picked");
  $("hold-picked").textContent = ids.length > 1 ? t("map.hold_these", { n: ids.length })
    : t("map.hold_picked_one");
  $("hold-picked").disabled = !canClaim() || ids.length === 0;
}

async function claim(body) {
  if (body.seat_ids && !body.seat_ids.length) return; // nothing picked (any more)
  if (!canClaim()) return; // a waiting room's turn not (or no longer) there: nothing is sent
  const admission = page.queue ? turn() : null;
  const code = $("access-code").value.trim();
  if (presaleNow(clock.now()) && code) body = { ...body, access_code: code };
  say($("claim-message"), t("claim.asking"));
  const answer = await api(`${base}/holds`, { method: "POST", body, token: page.me.token,
    key: admission ? queueMemo().claimKey : randomKey(),
    headers: admission ? { [admission.header]: admission.token } : undefined });
  if (answer.status === 201 || answer.status === 200) {
    say($("claim-message"), "");
    page.picked.clear();
    if (page.queue) queueSpent();
    adopt(answer.body.hold_id, "");
    page.live?.refresh();
    return;
  }
  const refused = errorCode(answer);
  if (refused.startsWith("access_code_")) {
    say($("claim-message"), claimError(refused), "bad");
    show("code-row");
    $("access-code").focus();
    return;
  }
  refusedClaim(answer, refused);
}

function refusedClaim(answer, code) {
  if (code === "seat_taken") page.live?.refresh();
  if (code === "unauthorized" || code === "token_revoked") return signOut();
  if (code.startsWith("admission_")) {
    say($("claim-message"), claimError(code), "bad");
    if (!page.queue) enterQueue(); // the event got a room since this page asked
    else queueAsk("look"); // the queue tells what became of the turn
    return;
  }
  let text = claimError(code) || t("claim.refused", { code });
  if (code === "not_enough_seats") text = t("claim.not_enough_seats", { n: answer.body.error.available });
  say($("claim-message"), text, "bad");
}

// --- the hold ---------------------------------------------------------------------------

function adopt(holdId, why) {
  localStorage.setItem(holdKey(), holdId);
  follow(holdId, why);
}

function follow(holdId, why) {
  clearTimeout(page.pollTimer);
  page.hold = { hold_id: holdId, state: "…", charges: [], seat_ids: [] };
  page.followNote = why;
  page.payNote = "";
  pollHold();
}

const LIVE_CHARGES = new Set(["CHARGING", "REFUNDING"]);

function watching(h) {
  return ["RESERVED", "QUARANTINED", "CONFIRMING"].includes(h.state)
    || (h.state === "CONFIRMED" && !h.order)
    || h.charges.some((c) => LIVE_CHARGES.has(c.state));
}

async function pollHold() {
  const id = page.hold && page.hold.hold_id;
  if (!id) return;
  const answer = await api(`${base}/holds/${encodeURIComponent(id)}`, { token: page.me.token });
  if (!page.hold || page.hold.hold_id !== id) return; // another hold was followed meanwhile
  if (answer.status === 404) {
    localStorage.removeItem(holdKey());
    page.hold = null;
    show("hold-panel", false);
    return;
  }
  if (answer.status === 200) {
    page.hold = answer.body;
    renderHold();
    const newer = localStorage.getItem(holdKey());
    if (page.hold.reason === "replaced_by_new_claim" && newer && newer !== id) {
      setTimeout(() => follow(newer, t("follow.other_tab_new")), 2500);
      return;
    }
  }
  if (answer.status !== 200 || watching(page.hold)) page.pollTimer = setTimeout(pollHold, 1000);
}

function chargeLines(h) {
  const cur = page.event ? page.event.currency : "EUR";
  // A part of the order given back (ADR 0043) is a charge of its own: a refund, not a payment.
  return h.charges.map((c) => el("li", { class: `charge ${c.state}` },
    t(/:r[0-9a-f]{12}$/.test(c.charge_id) ? "charge.refund_line" : "charge.payment_line", {
      amount: cash(c.amount, cur),
      state: has(`charge.${c.state}`) ? t(`charge.${c.state}`) : c.state,
    })));
}

function refundNote(h) {
  if (h.charges.some((c) => c.state === "REFUNDED")) {
    return t("note.refunded");
  }
  if (h.charges.some((c) => c.state === "REFUNDING")) {
    return t("note.refunding");
  }
  if (h.charges.some((c) => c.state === "CHARGING")) {
    return t("note.in_flight");
  }
  return "";
}

// What the hold's state means for the buyer, truthfully: [text, tone].
// Seats in words where the map names them ("Section A, row 3, seat 5"), else by id.
function seatWords(ids) {
  return page.map ? page.map.namesOf(ids) : t("seats.ids", { ids: ids.join(", ") });
}

function describe(h) {
  const seats = h.seat_ids.join(", ");
  switch (h.state) {
    case "CONFIRMING": return [t("describe.confirming"), "ok"];
    case "CONFIRMED": {
      const o = h.order;
      if (!o) return [t("describe.confirming"), "ok"];
      const back = o.refunded ? t("describe.given_back", { amount: cash(o.refunded, o.currency) }) : "";
      return [t("describe.confirmed", { seats: seatWords(o.seat_ids), amount: cash(o.amount, o.currency),
        given_back: back }), "ok"];
    }
    case "EXPIRED": return [t("describe.expired", { seats, note: refundNote(h) }), "bad"];
    case "RELEASED":
      if (h.reason === "replaced_by_new_claim") {
        return [t("describe.replaced", { note: refundNote(h) }), "warn"];
      }
      return [t("describe.released", { seats, note: refundNote(h) }), "warn"];
    case "QUARANTINED":
      return [t("describe.quarantined", { seats, time: clockTime(h.quarantine_until_ms, lang) }), "warn"];
    case "EXCEPTION": return [t("describe.exception"), "bad"];
    case "REVOKED": return [t("describe.revoked"), "bad"];
    default: break;
  }
  if (h.charge_in_flight) return [page.payNote || t("describe.waiting"), ""];
  const last = h.charges[h.charges.length - 1];
  if (last && (last.state === "DECLINED" || last.state === "FAILED")) {
    return [t(`describe.${last.state.toLowerCase()}`), "bad"];
  }
  return [t("describe.held", { seats }), ""];
}

function renderHold() {
  const h = page.hold;
  show("hold-panel");
  const cur = page.event ? page.event.currency : "EUR";
  const amount = h.amount ?? (page.event ? priceOf(h.seat_ids) : null);
  const total = amount !== null ? cash(amount, cur) : "";
  $("hold-seats").textContent = h.seat_ids.length ? `${seatWords(h.seat_ids)} · ${total}` : "";
  let [text, tone] = describe(h);
  if (page.followNote) text = `${text} (${page.followNote})`;
  const order = h.order; // a confirmed, told hold: its number and the code for the door (ADR 0042)
  show("order", Boolean(order));
  if (order && $("order-number").textContent !== order.order_number) {
    $("order-number").textContent = order.order_number;
    $("order-qr").src = order.qr;
    myOrders(); // it is in the ledger now: under "My orders" too
  }
  say($("hold-message"), text, tone);
  $("hold-charges").replaceChildren(...chargeLines(h));
  const live = h.state === "RESERVED";
  if (!live && page.payment) closePaymentForm(); // the hold ended: its payment form goes
  show("payment-form", live && Boolean(page.payment));
  $("pay").hidden = !live || Boolean(page.payment);
  $("pay").disabled = Boolean(h.charge_in_flight);
  $("pay").textContent = total ? t("hold.pay_amount", { amount: total }) : t("hold.pay");
  $("release").hidden = !(live || h.state === "QUARANTINED") || h.given_up;
  const holding = ["RESERVED", "QUARANTINED", "CONFIRMED", "CONFIRMING"].includes(h.state);
  page.map?.setMine(holding ? h.seat_ids : []);
  renderHoldClock();
}

function renderHoldClock() {
  const h = page.hold;
  if (!h || !h.expires_ms) return;
  if (h.state !== "RESERVED") {
    $("hold-countdown-label").textContent = t("hold.label");
    $("hold-countdown").textContent = has(`hold.state.${h.state}`) ? t(`hold.state.${h.state}`) : h.state;
    return;
  }
  const left = h.expires_ms - clock.now();
  $("hold-countdown-label").textContent = t("hold.left");
  $("hold-countdown").textContent = left > 0 ? duration(left) : t("hold.deadline_passed");
}

async function pay() {
  const h = page.hold;
  page.payKey = page.payKey || randomKey(); // the same key if this click is retried
  $("pay").disabled = true;
  const answer = await api(`${base}/holds/${encodeURIComponent(h.hold_id)}/charges`, {
    method: "POST", body: {}, token: page.me.token, key: page.payKey });
  page.payKey = null;
  if (answer.status === 202) {
    const form = answer.body.payment_form;
    page.payNote = answer.body.client_secret && !form
      ? t("pay.no_form")
      : answer.body.provider_status === "timeout" ? t("pay.timeout") : "";
    if (answer.body.client_secret && form) await openPaymentForm(form, answer.body.client_secret);
    renderHold();
  } else {
    say($("hold-message"), t("pay.refused", { code: errorCode(answer) }), "bad");
  }
  clearTimeout(page.pollTimer);
  pollHold();
}

// --- paying on the page with Stripe.js (ADR 0039) ------------------------------------------
// The charge start gives the intent's client secret and where Stripe.js is: the page mounts the
// Payment Element, and Stripe.js confirms the card (3-D Secure in its own dialog). What the
// page then tells comes from the hold, as for any provider: the callbacks decide.

function loadScript(url) {
  if (window.Stripe) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = url;
    script.addEventListener("load", resolve);
    script.addEventListener("error", () => reject(new Error("Stripe.js did not load")));
    document.head.append(script);
  });
}

async function openPaymentForm(form, clientSecret) {
  try {
    await loadScript(form.js_url);
    const stripe = window.Stripe(form.publishable_key);
    const elements = stripe.elements({ clientSecret });
    const element = elements.create("payment");
    element.mount("#payment-element");
    page.payment = { stripe, elements, element };
  } catch {
    page.payNote = t("pay.form_failed");
    return;
  }
  page.payNote = t("pay.enter_card");
  $("payment-error").textContent = "";
  $("pay-confirm").disabled = false;
}

function closePaymentForm() {
  page.payment?.element.destroy();
  page.payment = null;
  show("payment-form", false);
}

async function confirmPayment() {
  const p = page.payment;
  if (!p) return;
  $("pay-confirm").disabled = true;
  $("payment-error").textContent = "";
  page.payNote = t("pay.sent");
  renderHold();
  let error;
  try {
    ({ error } = await p.stripe.confirmPayment({ elements: p.elements, redirect: "if_required" }));
  } catch {
    error = { type: "api_connection_error", message: t("pay.not_sent") };
  }
  if (!error) {
    closePaymentForm();
  } else if (error.type !== "validation_error" && error.type !== "api_connection_error") {
    // The provider answered (a decline, a failed 3-D Secure, a wrong CVC...): that attempt is
    // a failed charge to us, and its intent is spent. The hold tells it; Pay starts anew.
    closePaymentForm();
    page.payNote = "";
  } else {
    page.payNote = t("pay.enter_card");
    $("payment-error").textContent = error.message;
    $("pay-confirm").disabled = false;
  }
  renderHold();
  clearTimeout(page.pollTimer);
  pollHold();
}

async function release() {
  const h = page.hold;
  const answer = await api(`${base}/holds/${encodeURIComponent(h.hold_id)}`, {
    method: "DELETE", token: page.me.token });
  if (answer.status >= 400) say($("hold-message"), t("release.refused", { code: errorCode(answer) }), "bad");
  clearTimeout(page.pollTimer);
  pollHold();
  page.live?.refresh();
}

// --- the waiting room (ADR 0029) ---------------------------------------------------------
// Whether the event has a room: its public view's `waiting_room` (and the queue's own 404
// no_waiting_room, should a room be added later); without one the page goes straight to the map. With one, the buyer joins (a second tab or a reload keeps the place),
// and the page looks at its place when the API says (poll_after_ms, within sane bounds), or when
// a Retry-After says, never in a loop. While the buyer waits the page opens no seat stream; once
// admitted it opens the map, and its claims carry the admission in the header the API names,
// all under one Idempotency-Key per admission, shared by the tabs: a refused claim tried again
// is the same claim to the queue, which spends an admission once.

const QUEUE_MIN_MS = 250; // never look again sooner, whatever a hint says
const QUEUE_MAX_MS = 300000; // look at least this often (a laptop waking from sleep catches up)
const QUEUE_NOT_OPEN_MS = 15000; // a room whose sale is not open yet: ask again this often
const QUEUE_FULL_MS = 30000;
const QUEUE_BACKOFF_MS = [1000, 2000, 4000, 8000, 16000, 30000]; // no answer, or a refusal

const queueKey = () => `onsale.queue.${eventId}.${page.me.login}`;

// What this browser remembers of the login's place: that it joined (a reload looks rather than
// joins: a join after a used turn would take a new place), and its admission's claim key.
function queueMemo() {
  try {
    return JSON.parse(localStorage.getItem(queueKey()) || "{}");
  } catch {
    return {};
  }
}

function remember(changes) {
  localStorage.setItem(queueKey(), JSON.stringify({ ...queueMemo(), ...changes }));
}

// The admission a claim is sent with now, or null. Admitted: the one the queue gave. Used: the
// same one while it lives if its claim made no hold (refused after it spent the turn, a seat
// taken meanwhile), to be sent again under the same key, as the API allows (ADR 0029).
function turn() {
  const v = page.queue?.view;
  if (!v) return null;
  if (v.state === "admitted") return v.admission;
  const memo = queueMemo();
  if (v.state !== "used" || !memo.token || memo.held || !(memo.expires_ms > clock.now())) return null;
  return { header: memo.header, token: memo.token, expires_ms: memo.expires_ms };
}

function enterQueue() {
  if (page.queue) clearTimeout(page.queue.timer);
  page.queue = { view: null, timer: null, failures: 0, note: "" };
  return queueAsk(queueMemo().joined ? "look" : "join");
}

function queueLater(mode, ms) {
  const q = page.queue;
  clearTimeout(q.timer);
  const wait = Math.min(QUEUE_MAX_MS, Math.max(QUEUE_MIN_MS, ms));
  q.timer = setTimeout(() => queueAsk(mode), wait);
}

async function queueAsk(mode) {
  const q = page.queue;
  if (!q) return;
  clearTimeout(q.timer);
  const answer = mode === "join"
    ? await api(`${base}/queue`, { method: "POST", body: {}, token: page.me.token })
    : await api(`${base}/queue/me`, { token: page.me.token });
  if (page.queue !== q) return; // the page left this queue meanwhile
  if (answer.status === 200 || answer.status === 201) return onPlace(answer.body);
  const code = errorCode(answer);
  if (code === "no_waiting_room" || code === "sale_closed" || code === "event_not_found") {
    return noRoom(); // the map says what the sale is
  }
  if (code === "not_in_queue") return queueAsk("join");
  if (code === "unauthorized" || code === "token_revoked") return signOut();
  const again = q.view ? "look" : "join";
  if (code === "sale_not_open") {
    queueNote(t("queue.not_open"), "");
    return queueLater(again, QUEUE_NOT_OPEN_MS);
  }
  if (code === "queue_full") {
    queueNote(t("queue.full"), "warn");
    return queueLater("join", QUEUE_FULL_MS);
  }
  // Rate limited, unavailable, no network: again when told (Retry-After), else later and later.
  q.failures += 1;
  const backoff = QUEUE_BACKOFF_MS[Math.min(q.failures, QUEUE_BACKOFF_MS.length) - 1];
  const wait = answer.retryAfterS !== null && answer.retryAfterS !== undefined
    ? answer.retryAfterS * 1000 : backoff;
  queueNote(t("queue.no_answer", { code }), "warn");
  queueLater(again, wait * (1 + Math.random() / 4));
}

function noRoom() {
  if (page.queue) clearTimeout(page.queue.timer);
  page.queue = null;
  show("queue-panel", false);
  document.title = page.title;
  openMap();
}

function onPlace(view) {
  const q = page.queue;
  q.view = view;
  q.failures = 0;
  q.note = "";
  clock.update(view.server_time_ms);
  const memo = queueMemo();
  const a = view.admission;
  if (a && memo.token !== a.token) { // a new turn: its own claim key, shared by the tabs
    remember({ joined: true, token: a.token, header: a.header, expires_ms: a.expires_ms,
      claimKey: randomKey(), held: false });
  } else if (!memo.joined) {
    remember({ joined: true });
  }
  renderQueue();
  const hint = view.poll_after_ms;
  switch (view.state) {
    case "waiting":
      closeMap();
      queueLater("look", hint ?? 5000);
      break;
    case "admitted":
      openMap();
      // With no seat free now the API says when to look again; else once the turn ends (to say
      // so: the page does not decide it).
      queueLater("look", hint ?? view.admission.expires_ms - clock.now() + 1000);
      break;
    case "used": // the turn made its claim: the map shows its seats; a new claim needs a new turn
      if (!page.map || turn()) openMap();
      if (turn()) queueLater("look", turn().expires_ms - clock.now() + 1000);
      break;
    default: // lapsed, sold_out: no claim, no more looks
      closeMap();
      break;
  }
}

// This page's claim spent the admission: the queue need not be asked.
function queueSpent() {
  const q = page.queue;
  remember({ held: true });
  clearTimeout(q.timer);
  q.view = { ...q.view, state: "used", admission: null, poll_after_ms: null };
  renderQueue();
}

function queueNote(text, tone) {
  const q = page.queue;
  q.note = text;
  if (!q.view) {
    show("queue-panel");
    queueStatus(text, tone);
  } else {
    renderQueue();
  }
}

// The live region speaks only when its text changes (a new position, a new state).
function queueStatus(text, tone) {
  const node = $("queue-status");
  if (node.textContent !== text) node.textContent = text;
  node.className = `message ${tone}`;
}

function roughly(seconds) {
  if (seconds < 60) return t("queue.about_s", { n: Math.max(1, Math.round(seconds)) });
  if (seconds < 3600) return t("queue.about_min", { n: Math.round(seconds / 60) });
  return t("queue.about_h", { n: (seconds / 3600).toLocaleString(lang, { maximumFractionDigits: 1 }) });
}

function renderQueue() {
  const v = page.queue.view;
  show("queue-panel");
  const waiting = v.state === "waiting";
  const drawn = waiting && v.drawn && v.position !== null;
  let text = "";
  let tone = "";
  if (waiting && !drawn) text = t("queue.in_queue");
  else if (waiting) text = t("queue.number", { position: v.position });
  else if (v.state === "admitted") {
    tone = "ok";
    text = v.free > 0 ? t("queue.your_turn") : t("queue.your_turn_none_free");
  } else if (v.state === "used" && turn()) {
    tone = "warn";
    text = t("queue.refused_after_turn");
  } else if (v.state === "used") text = t("queue.used");
  else if (v.state === "lapsed") {
    tone = "warn";
    text = t("queue.lapsed");
  } else if (v.state === "sold_out") {
    tone = "bad";
    text = t("queue.sold_out");
  }
  queueStatus(text, tone);
  show("queue-place", drawn);
  $("queue-position").textContent = drawn ? String(v.position) : "";
  show("queue-wait", drawn);
  if (drawn) {
    $("queue-estimate").textContent = v.estimate_s !== null ? roughly(v.estimate_s)
      : v.free === 0 ? t("queue.none_free") : t("queue.not_known");
  }
  const figures = [];
  if (waiting && !drawn) figures.push(t("queue.entries", { n: v.entries }));
  if (drawn) {
    const rate = v.admission_rate_per_s.toLocaleString(lang, { minimumFractionDigits: 1, maximumFractionDigits: 1 });
    figures.push(t("queue.admitted", { n: v.admitted, rate }));
    if (v.free === 0) figures.push(t("queue.may_come_back"));
  }
  if (v.state !== "sold_out") {
    figures.push(t("queue.seats", { free: v.free, held: v.held, blocked: v.blocked }));
  }
  if (page.queue.note) figures.unshift(page.queue.note);
  $("queue-detail").textContent = figures.join(" ");
  const again = (v.state === "used" && !turn()) || v.state === "lapsed";
  show("queue-again", again);
  show("queue-rules", waiting);
  document.title = v.state === "admitted" ? t("queue.title_turn", { title: page.title }) : page.title;
  renderQueueClock();
}

function renderQueueClock() {
  const v = page.queue && page.queue.view;
  if (!v) return;
  const now = clock.now();
  let label = "";
  let text = "";
  if (v.state === "waiting" && !v.drawn) {
    label = t("queue.opens_in");
    text = now < v.opens_at_ms ? duration(v.opens_at_ms - now) : t("queue.drawing");
  } else if (turn()) {
    label = t("queue.turn_ends_in");
    const left = turn().expires_ms - now;
    text = left > 0 ? duration(left) : t("queue.turn_ended");
  }
  show("queue-timer", Boolean(label));
  $("queue-clock-label").textContent = label;
  $("queue-clock").textContent = text;
}

// --- the map ------------------------------------------------------------------------------

function closeMap() {
  show("map-panel", false);
  show("sale-panel", false);
  page.live?.stop();
}

async function openMap() {
  if (page.live) {
    show("map-panel");
    if (page.live.stopped) page.live.start();
    return;
  }
  if (page.mapOpening) return;
  page.mapOpening = true;
  const layout = await api(`${base}/seatmap`);
  page.mapOpening = false;
  if (layout.status !== 200) {
    const code = errorCode(layout);
    const words = { event_not_found: "map.no_event", wrong_event_kind: "map.goods",
      seat_map_too_large: "map.too_large" };
    say($("event-message"), words[code] ? t(words[code]) : t("map.unavailable", { code }), "bad");
    show("sale-panel");
    if (code !== "seat_map_too_large") return;
  }
  show("map-panel");
  page.map = new SeatMap($("map"), layout.status === 200 ? layout.body : { seats: [], positioned: false },
    { onToggle: toggle });
  page.layout = layout.status === 200 ? layout.body : {};
  page.levelOf = new Map(page.map.seats.map((s) => [s[0], s[5]]));
  const levels = [...new Set(page.map.seats.map((s) => s[5]).filter(Boolean))];
  const priced = page.layout.price_levels || {};
  const cur = page.event ? page.event.currency : "EUR";
  const named = levels.map((l) => (l in priced ? `${l} ${cash(priced[l], cur)}` : l));
  const one = Object.keys(priced).length ? "" : t("map.one_price");
  $("levels").textContent = levels.length ? t("map.levels", { levels: named.join(", "), one }) : "";
  page.live = new LiveSeats(eventId, {
    onSeats, onChange, onClock: (ms) => clock.update(ms),
    onMode: (mode) => { $("feed-mode").textContent = mode === "live" ? t("map.live") : t("map.polled"); },
  });
  page.live.start();
  if (page.hold && page.hold.expires_ms) renderHold(); // its seats, drawn as the buyer's own
}

// --- start ----------------------------------------------------------------------------

// The buyer's own orders of this event (ADR 0042), from the ledger: hidden when the API has
// none to show, or no ledger to read them from (503 orders_unavailable).
async function myOrders() {
  const answer = await api(`/v1/me/orders?event_id=${encodeURIComponent(eventId)}`,
    { token: page.me.token });
  const orders = answer.status === 200 ? answer.body.orders : [];
  show("orders-panel", orders.length > 0);
  $("my-orders").replaceChildren(...orders.map((o) => el("li", {},
    el("strong", { text: o.order_number }),
    ` · ${(o.seat_ids || []).join(", ") || t("orders.goods")} · ${cash(o.amount ?? 0, o.currency)}` +
    `${o.refunded ? ` ${t("orders.given_back", { amount: cash(o.refunded, o.currency) })}` : ""}`)));
}

function start() {
  $("who").textContent = t("signed_in_as", { login: page.me.login });
  myOrders();
  show("sign-out");
  $("hold-picked").addEventListener("click", () => claim({ seat_ids: [...page.picked] }));
  $("hold-best").addEventListener("click", () => claim({ quantity: Number($("best-n").value) }));
  $("pay").addEventListener("click", pay);
  $("pay-confirm").addEventListener("click", confirmPayment);
  $("release").addEventListener("click", release);
  $("queue-rejoin").addEventListener("click", () => {
    page.queue.view = null; // a new place: the old one's figures no longer hold
    queueAsk("join");
  });
  window.addEventListener("storage", (ev) => {
    if (ev.key === holdKey() && ev.newValue && ev.newValue !== page.hold?.hold_id) {
      follow(ev.newValue, t("follow.from_other_tab"));
    }
  });
  const current = localStorage.getItem(holdKey());
  if (current) follow(current, "");
  loadPresales();
  setInterval(loadPresales, 60_000); // a window added later (rare) is seen within a minute
  setInterval(tick, 250);
  startQueueOrMap();
}

// The event's public view says whether it has a waiting room: without one the map opens at
// once (no queue request, so no 404 in the console); with one the queue's answers decide when.
async function startQueueOrMap() {
  const event = await api(base);
  if (event.status === 200 && event.body.waiting_room === false) return noRoom();
  return enterQueue(); // a room, or no answer: the queue itself says (404 no_waiting_room)
}

// --- the events on sale or to come (ADR 0041) -----------------------------------------------

// When the show starts, in its own time zone (the buyer's when it has none).
function showTime(ev) {
  if (!ev.starts_at_ms) return "";
  const options = { dateStyle: "full", timeStyle: "short", timeZone: ev.time_zone || undefined };
  try {
    return new Intl.DateTimeFormat(localeOf(ev), options).format(new Date(ev.starts_at_ms));
  } catch {
    return new Date(ev.starts_at_ms).toString();
  }
}

async function listEvents() {
  show("choose-event");
  const answer = await api("/v1/events?limit=50");
  if (answer.status !== 200) {
    say($("event-list-message"), t("choose.unavailable"), "bad");
    return;
  }
  const items = answer.body.events.map((ev) => {
    const link = el("a", { href: `/ui/buyer.html?event=${encodeURIComponent(ev.event_id)}`,
      text: ev.name || ev.event_id });
    const when = showTime(ev);
    const line = [ev.venue, when].filter(Boolean).join(" · ");
    return el("li", {}, link, line ? el("span", { class: "muted", text: ` ${line}` }) : "");
  });
  $("event-list").replaceChildren(...items);
  if (!items.length) say($("event-list-message"), t("choose.none"));
}

// The language picker: the catalogue's languages, each named in itself; choosing one reloads.
function offerLanguages() {
  const select = $("lang");
  select.replaceChildren(...languages().map(([code, name]) => el("option", { value: code, text: name })));
  select.value = lang;
  select.addEventListener("change", () => switchTo(select.value));
}

async function main() {
  await loadStrings();
  offerLanguages();
  const config = await api("/v1/auth/config");
  const oidc = config.status === 200 ? config.body.oidc : null;
  const signedIn = oidc ? await signInThroughProvider(oidc) : false;
  if (signedIn === "away") return; // gone to the provider, silently
  if (!eventId) {
    listEvents();
    return;
  }
  $("title").textContent = t("page.title_event", { event: eventId });
  $("sign-out").addEventListener("click", signOut);
  if (signedIn) return start();
  if (oidc) return offerProvider();
  const saved = localStorage.getItem(tokenKey());
  page.me = saved ? JSON.parse(saved) : null;
  if (page.me) return start();
  return signIn();
}

main();
