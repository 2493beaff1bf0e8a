// Helpers shared by the buyer's page and the dashboard: calls to the public API, the server's
// clock, money and durations. No framework, no build step.

export const $ = (id) => document.getElementById(id);

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children) node.append(child);
  return node;
}

// One call to the API: {status, body, etag, retryAfterS}. A network failure is status 0, never a
// throw. `headers`: more request headers (a waiting room's admission, say); `retryAfterS` is the
// answer's Retry-After in seconds (429, 503), or null.
export async function api(path, { method = "GET", body, token, key, etag, headers: more } = {}) {
  const headers = { Accept: "application/json", ...more };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (token) headers.Authorization = `Bearer ${token}`;
  if (key) headers["Idempotency-Key"] = key;
  if (etag) headers["If-None-Match"] = etag;
  try {
    const r = await fetch(path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
    const type = r.headers.get("content-type") || "";
    const parsed = type.includes("json") ? await r.json() : await r.text();
    const retry = Number.parseInt(r.headers.get("retry-after") || "", 10);
    return { status: r.status, body: parsed, etag: r.headers.get("etag"),
      retryAfterS: Number.isFinite(retry) && retry >= 0 ? retry : null };
  } catch (err) {
    return { status: 0, body: { error: { code: "network", message: String(err) } } };
  }
}

export function errorCode(answer) {
  return (answer.body && answer.body.error && answer.body.error.code) || `http_${answer.status}`;
}

// The server's clock (Redis's), as told by the seat state and stream: an offset to this
// browser's clock, so countdowns agree with the server's deadlines, not the laptop's.
export class ServerClock {
  constructor() { this.offset = null; }
  update(serverMs) {
    if (typeof serverMs === "number") this.offset = serverMs - Date.now();
  }
  now() { return Date.now() + (this.offset ?? 0); }
  get known() { return this.offset !== null; }
}

// `locale`: the page's language (the buyer's page), else the browser's (the dashboard).
export function money(minor, currency, locale = undefined) {
  try {
    return new Intl.NumberFormat(locale, { style: "currency", currency }).format(minor / 100);
  } catch {
    return `${(minor / 100).toFixed(2)} ${currency}`;
  }
}

export function duration(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = String(s % 60).padStart(2, "0");
  return h ? `${h}:${String(m).padStart(2, "0")}:${sec}` : `${m}:${sec}`;
}

export function clockTime(ms, locale = undefined) {
  return ms ? new Date(ms).toLocaleTimeString(locale) : "";
}

export function randomKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export function say(node, text, tone = "") {
  node.textContent = text;
  node.className = `message ${tone}`;
}
