// The buyer's page: sign in (the demo's name login), the seat map with live availability, a
// countdown to T0 by the server's clock, picking seats or the best n together, the hold's
// countdown, paying through the provider, and the hold's truthful end. Everything goes through
// the public API with the buyer's own token. Two tabs of one browser share the token and the
// current hold (localStorage): a claim in one tab replaces the other's hold, and both say so.

import {
  $, api, clockTime, duration, el, errorCode, money, randomKey, say, ServerClock,
} from "./common.js";
import { LiveSeats, SeatMap } from "./seatmap.js";

const PARTY_MAX = 6;
const eventId = new URLSearchParams(location.search).get("event");
const base = `/v1/events/${encodeURIComponent(eventId || "")}`;
const clock = new ServerClock();
const page = { me: null, event: null, map: null, live: null, hold: null, picked: new Set(),
  pollTimer: null, payKey: null, payNote: "" };

const tokenKey = () => `onsale.buyer.${eventId}`;
const holdKey = () => `onsale.hold.${eventId}.${page.me.login}`;

const CLAIM_ERRORS = {
  seat_taken: "Sorry: one of these seats was just taken by someone else. Pick another.",
  sold_out: "Sold out: no seat is free right now. Seats may come back; the map shows them.",
  sale_not_open: "The sale has not opened yet.",
  sale_closed: "The sale is closed.",
  charge_in_flight: "Your other hold has a payment in flight: wait for it to finish.",
  limit_exceeded: "You have reached the number of seats one buyer may have.",
  rate_limited: "Too many tries at once: wait a moment and try again.",
  party_too_large: "That is more seats than one hold may have here.",
  unknown_seat: "That seat does not exist.",
};

function show(id, visible = true) { $(id).hidden = !visible; }

function signIn() {
  show("login-panel");
  $("login-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const login = $("login-name").value.trim();
    const answer = await api("/v1/login", { method: "POST", body: { login, event_id: eventId } });
    if (answer.status !== 200) {
      say($("login-message"), `Sign-in refused (${errorCode(answer)}).`, "bad");
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
  location.reload();
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

function saleText(ev, now) {
  if (!ev) return ["Sale", "…"];
  if (ev.recovering) return ["Sale", "Recovering: try again shortly"];
  if (ev.status === "draft") return ["Sale", "Not on sale yet"];
  if (ev.status === "closed" || ev.status === "cancelled") return ["Sale", `Sale ${ev.status}`];
  if (now < ev.opens_at_ms) return ["Sale opens in", duration(ev.opens_at_ms - now)];
  return ["Sale", ev.free > 0 ? "On sale now" : "Sold out"];
}

function onSale() {
  const ev = page.event;
  return Boolean(ev) && ev.status === "open" && !ev.recovering && clock.now() >= ev.opens_at_ms;
}

function renderEvent() {
  const ev = page.event;
  if (!ev) return;
  show("sale-panel");
  $("price").textContent = money(ev.price_minor, ev.currency);
  $("sale-status").textContent = ev.status;
  $("counts").replaceChildren(
    ...["free", "held", "blocked", "sold"].map((k) => el("span", {}, `${k} `, el("b", { text: String(ev[k]) }))),
  );
  $("best-n").max = String(ev.max_party || PARTY_MAX);
  renderPicked();
}

function tick() {
  const [label, text] = saleText(page.event, clock.now());
  $("countdown-label").textContent = label;
  $("countdown").textContent = text;
  const can = onSale();
  $("hold-best").disabled = !can;
  $("hold-picked").disabled = !can || page.picked.size === 0;
  renderHoldClock();
}

function toggle(seatId, state) {
  if (page.picked.has(seatId)) page.picked.delete(seatId);
  else if (state !== "F") {
    say($("claim-message"), `Seat ${seatId} is not free.`, "warn");
    return;
  } else if (page.picked.size >= ((page.event && page.event.max_party) || PARTY_MAX)) {
    say($("claim-message"), "That is as many seats as one hold may have.", "warn");
    return;
  } else page.picked.add(seatId);
  page.map.setSelected(page.picked);
  renderPicked();
}

function renderPicked() {
  // A picked seat someone else took since is dropped from the pick, saying so.
  for (const id of [...page.picked]) {
    if (page.map.stateOf(id) === "F") continue;
    page.picked.delete(id);
    say($("claim-message"), `Sorry: seat ${id} was just taken by someone else. Pick another.`, "bad");
  }
  page.map.setSelected(page.picked);
  const ids = [...page.picked];
  $("picked").textContent = ids.length ? `Picked: ${ids.join(", ")}` : "No seat picked";
  $("hold-picked").textContent = ids.length > 1 ? `Hold these ${ids.length} seats` : "Hold picked seat";
  $("hold-picked").disabled = !onSale() || ids.length === 0;
}

async function claim(body) {
  if (body.seat_ids && !body.seat_ids.length) return; // nothing picked (any more)
  say($("claim-message"), "Asking for your seats…");
  const answer = await api(`${base}/holds`, { method: "POST", body, token: page.me.token,
    key: randomKey() });
  if (answer.status === 201 || answer.status === 200) {
    say($("claim-message"), "");
    page.picked.clear();
    adopt(answer.body.hold_id, "");
    page.live.refresh();
    return;
  }
  const code = errorCode(answer);
  if (code === "seat_taken") page.live.refresh();
  if (code === "unauthorized" || code === "token_revoked") return signOut();
  let text = CLAIM_ERRORS[code] || `Refused: ${code}.`;
  if (code === "not_enough_seats") text = `Only ${answer.body.error.available} seats are free together or apart.`;
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
      setTimeout(() => follow(newer, "another tab made a new hold"), 2500);
      return;
    }
  }
  if (answer.status !== 200 || watching(page.hold)) page.pollTimer = setTimeout(pollHold, 1000);
}

function chargeLines(h) {
  const cur = page.event ? page.event.currency : "EUR";
  const words = {
    CHARGING: "payment in flight", CAPTURED: "paid", DECLINED: "declined", FAILED: "failed",
    REFUNDING: "being refunded", REFUNDED: "refunded", DISPUTED: "disputed",
    PROVIDER_REFUNDED: "refunded by the provider", CHARGED_BACK: "charged back",
  };
  return h.charges.map((c) => el("li", { class: `charge ${c.state}` },
    `Payment of ${money(c.amount, cur)}: ${words[c.state] || c.state}`));
}

function refundNote(h) {
  if (h.charges.some((c) => c.state === "REFUNDED")) {
    return " Your payment arrived after the deadline and was refunded.";
  }
  if (h.charges.some((c) => c.state === "REFUNDING")) {
    return " Your payment arrived after the deadline: it is being refunded.";
  }
  if (h.charges.some((c) => c.state === "CHARGING")) {
    return " A payment is still in flight: if it goes through, it will be refunded.";
  }
  return "";
}

// What the hold's state means for the buyer, truthfully: [text, tone].
function describe(h) {
  const seats = h.seat_ids.join(", ");
  switch (h.state) {
    case "CONFIRMING": return ["Payment received: confirming your seats…", "ok"];
    case "CONFIRMED":
      return h.order
        ? [`Confirmed: seats ${h.order.seat_ids.join(", ")}, paid ${money(h.order.amount, h.order.currency)}.`, "ok"]
        : ["Payment received: confirming your seats…", "ok"];
    case "EXPIRED": return [`Your hold expired; seats ${seats} went back on sale.${refundNote(h)}`, "bad"];
    case "RELEASED":
      if (h.reason === "replaced_by_new_claim") {
        return [`This hold was replaced by a newer one of yours (another tab).${refundNote(h)}`, "warn"];
      }
      return [`You released seats ${seats}.${refundNote(h)}`, "warn"];
    case "QUARANTINED":
      return [`The deadline passed while your payment was in flight: seats ${seats} are kept `
        + `until it resolves (at the latest ${clockTime(h.quarantine_until_ms)}).`, "warn"];
    case "EXCEPTION": return ["Your payment was reversed at the provider: the organiser will contact you.", "bad"];
    case "REVOKED": return ["This order was revoked; its payment is refunded.", "bad"];
    default: break;
  }
  if (h.charge_in_flight) return [page.payNote || "Payment sent to the provider: waiting for its answer…", ""];
  const last = h.charges[h.charges.length - 1];
  if (last && (last.state === "DECLINED" || last.state === "FAILED")) {
    return [`Your payment was ${last.state.toLowerCase()}: you may pay again before the deadline.`, "bad"];
  }
  return [`Seats ${seats} are held for you. Pay before the time runs out.`, ""];
}

function renderHold() {
  const h = page.hold;
  show("hold-panel");
  const cur = page.event ? page.event.currency : "EUR";
  const total = page.event ? money(page.event.price_minor * h.seat_ids.length, cur) : "";
  $("hold-seats").textContent = h.seat_ids.length ? `Seats ${h.seat_ids.join(", ")} · ${total}` : "";
  let [text, tone] = describe(h);
  if (page.followNote) text = `${text} (${page.followNote})`;
  say($("hold-message"), text, tone);
  $("hold-charges").replaceChildren(...chargeLines(h));
  const live = h.state === "RESERVED";
  $("pay").hidden = !live;
  $("pay").disabled = Boolean(h.charge_in_flight);
  $("pay").textContent = `Pay ${total}`;
  $("release").hidden = !(live || h.state === "QUARANTINED") || h.given_up;
  const holding = ["RESERVED", "QUARANTINED", "CONFIRMED", "CONFIRMING"].includes(h.state);
  page.map?.setMine(holding ? h.seat_ids : []);
  renderHoldClock();
}

function renderHoldClock() {
  const h = page.hold;
  if (!h || !h.expires_ms) return;
  if (h.state !== "RESERVED") {
    $("hold-countdown-label").textContent = "Hold";
    $("hold-countdown").textContent = h.state;
    return;
  }
  const left = h.expires_ms - clock.now();
  $("hold-countdown-label").textContent = "Time left to pay";
  $("hold-countdown").textContent = left > 0 ? duration(left) : "Deadline passed: waiting for the server…";
}

async function pay() {
  const h = page.hold;
  page.payKey = page.payKey || randomKey(); // the same key if this click is retried
  $("pay").disabled = true;
  const answer = await api(`${base}/holds/${encodeURIComponent(h.hold_id)}/charges`, {
    method: "POST", body: {}, token: page.me.token, key: page.payKey });
  page.payKey = null;
  if (answer.status === 202) {
    page.payNote = answer.body.client_secret
      ? "This provider needs its own payment form, which this page does not have."
      : answer.body.provider_status === "timeout"
        ? "The provider did not answer in time: its answer will still come, and this page shows it."
        : "";
    renderHold();
  } else {
    say($("hold-message"), `Payment refused: ${errorCode(answer)}.`, "bad");
  }
  clearTimeout(page.pollTimer);
  pollHold();
}

async function release() {
  const h = page.hold;
  const answer = await api(`${base}/holds/${encodeURIComponent(h.hold_id)}`, {
    method: "DELETE", token: page.me.token });
  if (answer.status >= 400) say($("hold-message"), `Release refused: ${errorCode(answer)}.`, "bad");
  clearTimeout(page.pollTimer);
  pollHold();
  page.live.refresh();
}

// --- start ----------------------------------------------------------------------------

async function start() {
  $("who").textContent = `Signed in as ${page.me.login}`;
  show("sign-out");
  const layout = await api(`${base}/seatmap`);
  if (layout.status !== 200) {
    const code = errorCode(layout);
    const words = { event_not_found: "There is no such event.",
      wrong_event_kind: "This event sells goods, not seats.",
      seat_map_too_large: "This venue is too large to draw: ask for the best seats." };
    say($("event-message"), words[code] || `The seat map is unavailable (${code}).`, "bad");
    show("sale-panel");
    if (code !== "seat_map_too_large") return;
  }
  show("map-panel");
  page.map = new SeatMap($("map"), layout.status === 200 ? layout.body : { seats: [], positioned: false },
    { onToggle: toggle });
  const levels = [...new Set(page.map.seats.map((s) => s[5]).filter(Boolean))];
  $("levels").textContent = levels.length ? `Price levels: ${levels.join(", ")} (one price)` : "";
  page.live = new LiveSeats(eventId, {
    onSeats, onChange, onClock: (ms) => clock.update(ms),
    onMode: (mode) => { $("feed-mode").textContent = mode === "live" ? "Live" : "Updated every 2 s"; },
  });
  page.live.start();
  $("hold-picked").addEventListener("click", () => claim({ seat_ids: [...page.picked] }));
  $("hold-best").addEventListener("click", () => claim({ quantity: Number($("best-n").value) }));
  $("pay").addEventListener("click", pay);
  $("release").addEventListener("click", release);
  window.addEventListener("storage", (ev) => {
    if (ev.key === holdKey() && ev.newValue && ev.newValue !== page.hold?.hold_id) {
      follow(ev.newValue, "from another tab");
    }
  });
  const current = localStorage.getItem(holdKey());
  if (current) follow(current, "");
  setInterval(tick, 250);
}

function main() {
  if (!eventId) {
    show("choose-event");
    return;
  }
  $("title").textContent = `Tickets · ${eventId}`;
  $("sign-out").addEventListener("click", signOut);
  const saved = localStorage.getItem(tokenKey());
  page.me = saved ? JSON.parse(saved) : null;
  if (page.me) start();
  else signIn();
}

main();
