// The seat map: drawn as SVG from /v1/events/{e}/seatmap, kept live from the server-sent
// stream /seatmap/stream (or, when a server refuses more streams, by polling /seatmap/state
// with If-None-Match: a 304 costs the server nothing). Keyboard: arrow keys move between
// seats, Enter or Space picks one.

import { api } from "./common.js";
import { t } from "./i18n.js";


const SVG = "http://www.w3.org/2000/svg";
const STEP = 28; // seat spacing of a map drawn without positions
const PER_ROW = 20;
const RADIUS = 11; // a seat's circle, in map units
// A seat is at least this many CSS px across on any screen (WCAG 2.2's 24 x 24 target): the
// map is drawn no smaller than that scale and scrolls sideways inside its frame instead.
const TARGET_PX = 24;

function svgEl(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

// Positions for a map without any: sections one under the other, rows of the seats' own row
// labels (or of PER_ROW seats), in rank order.
function gridPlaces(seats) {
  const out = [];
  const labels = [];
  let y = 0;
  let section = null;
  let row = null;
  let x = 0;
  let inSection = 0;
  for (const [id, sec, rowLabel] of seats) {
    if (sec !== section) {
      y += section === null ? 20 : 2 * STEP;
      labels.push({ x: 0, y: y - 4, text: sec || "Seats" });
      y += 8;
      section = sec;
      row = null;
      x = 0;
      inSection = 0;
    }
    const rowKey = rowLabel || `#${Math.floor(inSection / PER_ROW)}`;
    inSection += 1;
    if (rowKey !== row) {
      if (row !== null) y += STEP;
      row = rowKey;
      x = 0;
      if (rowLabel) labels.push({ x: -6, y: y + STEP / 2 + 4, text: rowLabel, anchor: "end" });
    }
    out.push({ id, x: x * STEP + STEP / 2, y: y + STEP / 2 });
    x += 1;
  }
  return { places: out, labels };
}

// A map with positions: each section named above its seats, each row's label left of its
// first seat.
function placed(seats) {
  const places = seats.map((s) => ({ id: s[0], x: s[3], y: s[4] }));
  const bounds = new Map();
  const rows = new Map();
  seats.forEach(([, section, row, x, y]) => {
    const b = bounds.get(section) || { x0: x, x1: x, y0: y };
    bounds.set(section, { x0: Math.min(b.x0, x), x1: Math.max(b.x1, x), y0: Math.min(b.y0, y) });
    if (!row) return;
    const key = `${section}\u0000${row}`;
    const r = rows.get(key) || { x, y, text: row };
    rows.set(key, x < r.x ? { x, y, text: row } : r);
  });
  const labels = [...bounds].filter(([name]) => name).map(([name, b]) => (
    { x: (b.x0 + b.x1) / 2, y: b.y0 - 18, text: name, anchor: "middle" }));
  for (const r of rows.values()) labels.push({ x: r.x - RADIUS - 6, y: r.y + 4, text: r.text, anchor: "end" });
  return { places, labels };
}

export class SeatMap {
  constructor(container, layout, { onToggle } = {}) {
    this.seats = layout.seats; // [seat_id, section, row, x, y, price_level, number]
    this.onToggle = onToggle || (() => {});
    this.index = new Map(this.seats.map((s, i) => [s[0], i]));
    this.states = "F".repeat(this.seats.length);
    this.selected = new Set();
    this.mine = new Set();
    this.focusAt = 0;
    this.nodes = [];
    this.draw(container, layout.positioned);
  }

  draw(container, positioned) {
    const drawn = positioned ? placed(this.seats) : gridPlaces(this.seats);
    const xs = drawn.places.map((p) => p.x).concat(drawn.labels.map((l) => l.x));
    const ys = drawn.places.map((p) => p.y).concat(drawn.labels.map((l) => l.y));
    if (!xs.length) xs.push(0);
    if (!ys.length) ys.push(0);
    const pad = 24;
    const minX = Math.min(...xs) - pad - 30; // room for the row labels
    const minY = Math.min(...ys) - pad;
    const width = Math.max(...xs) - minX + pad;
    const height = Math.max(...ys) - minY + pad;
    const svg = svgEl("svg", {
      class: this.seats.length > 40 ? "seatmap many" : "seatmap", viewBox: `${minX} ${minY} ${width} ${height}`, role: "group",
      "aria-label": t("map.aria"),
    });
    for (const label of drawn.labels) {
      const t = svgEl("text", { class: "label", x: label.x, y: label.y,
        "text-anchor": label.anchor || "start" });
      t.textContent = label.text;
      svg.append(t);
    }
    drawn.places.forEach((p, i) => {
      const g = svgEl("g", { class: "seat F", role: "checkbox", "aria-checked": "false",
        tabindex: i === 0 ? "0" : "-1", "data-seat": p.id });
      g.append(svgEl("circle", { cx: p.x, cy: p.y, r: RADIUS }));
      g.addEventListener("click", () => this.pick(i));
      this.nodes.push(g);
      svg.append(g);
    });
    svg.addEventListener("keydown", (ev) => this.key(ev));
    // Never smaller than a finger's target: wider than its frame, the map scrolls inside it.
    svg.style.minWidth = `${Math.ceil((width * TARGET_PX) / (2 * RADIUS))}px`;
    svg.style.maxHeight = "none";
    container.replaceChildren(svg);
    this.nodes.forEach((_, i) => this.paint(i));
  }

  key(ev) {
    const moves = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 };
    let to = null;
    if (ev.key in moves) to = this.focusAt + moves[ev.key];
    else if (ev.key === "Home") to = 0;
    else if (ev.key === "End") to = this.nodes.length - 1;
    else if (ev.key === "Enter" || ev.key === " ") {
      ev.preventDefault();
      this.pick(this.focusAt);
      return;
    }
    if (to === null) return;
    ev.preventDefault();
    this.focus(Math.max(0, Math.min(this.nodes.length - 1, to)));
  }

  focus(i) {
    this.nodes[this.focusAt].setAttribute("tabindex", "-1");
    this.focusAt = i;
    this.nodes[i].setAttribute("tabindex", "0");
    this.nodes[i].focus();
  }

  pick(i) {
    if (this.focusAt !== i) this.focus(i);
    this.onToggle(this.seats[i][0], this.states[i]);
  }

  label(i) {
    const [id, , , , , level] = this.seats[i];
    const state = t(this.mine.has(id) ? "map.state.mine" : `map.state.${this.states[i]}`);
    const parts = [this.nameOf(id), level && t("map.price_level", { level }), state,
      this.selected.has(id) && t("map.state.picked")];
    return parts.filter(Boolean).join(", ");
  }

  // A seat in words, as printed at the venue: "Section A, row 3, seat 5" (its id when the
  // map gives it no number).
  nameOf(id) {
    return this.namesOf([id]);
  }

  // Seats in words, grouped by section and row in the order given:
  // "Section A, row 3, seats 5, 6; Section B, seat 12".
  namesOf(ids) {
    const groups = [];
    for (const id of ids) {
      const i = this.index.get(id);
      const [, section, row, , , , number] = i === undefined ? [id, "", ""] : this.seats[i];
      const key = `${section}\u0000${row}`;
      const last = groups[groups.length - 1];
      if (last && last.key === key) last.seats.push(number || id);
      else groups.push({ key, section, row, seats: [number || id] });
    }
    return groups.map((g) => {
      const parts = [g.section && t("seats.section", { section: g.section }),
        g.row && t("seats.row", { row: g.row }),
        t(g.seats.length > 1 ? "seats.many" : "seats.one", { seats: g.seats.join(", ") })];
      const text = parts.filter(Boolean).join(", ");
      return text.charAt(0).toUpperCase() + text.slice(1);
    }).join("; ");
  }

  paint(i) {
    const id = this.seats[i][0];
    const g = this.nodes[i];
    const classes = ["seat", this.states[i]];
    if (this.mine.has(id)) classes.push("mine");
    if (this.selected.has(id)) classes.push("selected");
    g.setAttribute("class", classes.join(" "));
    g.setAttribute("aria-checked", this.selected.has(id) ? "true" : "false");
    g.setAttribute("aria-disabled", this.states[i] === "F" ? "false" : "true");
    g.setAttribute("aria-label", this.label(i));
  }

  setStates(states) {
    if (states.length !== this.seats.length) return;
    const old = this.states;
    this.states = states;
    for (let i = 0; i < states.length; i++) if (old[i] !== states[i]) this.paint(i);
  }

  applyChanges(changes) {
    const chars = this.states.split("");
    for (const [i, state] of changes) chars[i] = state;
    this.setStates(chars.join(""));
  }

  setSelected(ids) {
    const touched = new Set([...this.selected, ...ids]);
    this.selected = new Set(ids);
    for (const id of touched) if (this.index.has(id)) this.paint(this.index.get(id));
  }

  setMine(ids) {
    const touched = new Set([...this.mine, ...ids]);
    this.mine = new Set(ids);
    for (const id of touched) if (this.index.has(id)) this.paint(this.index.get(id));
  }

  stateOf(id) {
    return this.index.has(id) ? this.states[this.index.get(id)] : null;
  }
}

// The live feed of an event's seat states: callbacks get the whole state (`onSeats`) or the
// seats that moved (`onChange`), and the server's clock (`onClock`).
export class LiveSeats {
  constructor(eventId, { onSeats, onChange, onClock, onMode } = {}) {
    this.base = `/v1/events/${encodeURIComponent(eventId)}/seatmap`;
    this.cb = { onSeats, onChange, onClock, onMode };
    this.serial = null;
    this.etag = null;
    this.source = null;
    this.timer = null;
    this.stopped = false;
  }

  start() {
    this.stopped = false;
    this.stream();
  }

  stop() {
    this.stopped = true;
    if (this.source) this.source.close();
    clearTimeout(this.timer);
  }

  stream() {
    if (!window.EventSource) return this.poll();
    const source = new EventSource(`${this.base}/stream`);
    this.source = source;
    this.cb.onMode?.("live");
    source.addEventListener("seats", (ev) => this.whole(JSON.parse(ev.data)));
    source.addEventListener("change", (ev) => {
      const data = JSON.parse(ev.data);
      this.cb.onClock?.(data.server_time_ms);
      if (data.base !== this.serial) return this.resync();
      this.serial = data.serial;
      this.cb.onChange?.(data);
    });
    source.addEventListener("clock", (ev) => this.cb.onClock?.(JSON.parse(ev.data).server_time_ms));
    source.onerror = () => {
      // CONNECTING: the stream ended (it does every 30 s) and EventSource reconnects by itself.
      // CLOSED: the server refused it (too many streams, say): poll, and try a stream later.
      if (source.readyState === EventSource.CLOSED && !this.stopped) {
        this.source = null;
        this.poll(Date.now() + 30000);
      }
    };
  }

  whole(data) {
    this.serial = data.serial;
    this.cb.onClock?.(data.server_time_ms);
    this.cb.onSeats?.(data);
  }

  // A change that does not follow the state shown: start the stream again. Its first message
  // is the whole state and the changes after it come in order on the same connection; a state
  // fetched beside the stream could answer after a newer change and undo it.
  resync() {
    if (this.stopped) return;
    if (this.source) this.source.close();
    this.stream();
  }

  async poll(streamAgainAt = Infinity) {
    this.cb.onMode?.("polling");
    if (this.stopped) return;
    if (Date.now() >= streamAgainAt && window.EventSource) return this.stream();
    const answer = await api(`${this.base}/state`, { etag: this.etag });
    if (answer.status === 200) {
      this.etag = answer.etag;
      this.whole(answer.body);
    }
    this.timer = setTimeout(() => this.poll(streamAgainAt), 2000);
  }

  // A page that just changed seats itself asks at once rather than waiting for the stream.
  refresh() {
    if (!this.source) return;
    this.resync();
  }
}
