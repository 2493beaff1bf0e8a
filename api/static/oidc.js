// Sign-in through the identity provider (ADR 0050): OpenID Connect's authorization code flow
// with PKCE (S256), for a public client: the issuer's discovery document names the endpoints;
// the page goes to the provider, comes back with a code, and exchanges it, with the verifier
// only it knows, for tokens. The tokens live in this page's memory only (never in storage): a
// reload signs in again, silently (prompt=none) while the provider's session lasts; before the
// access token runs out, the refresh token gets a new one. What must survive the trip to the
// provider (the verifier, state, nonce, the page to come back to) waits in sessionStorage for
// that one trip.

const TRIP = "onsale.oidc.trip";
const b64url = (bytes) => btoa(String.fromCharCode(...bytes))
  .replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
const random = (n) => b64url(crypto.getRandomValues(new Uint8Array(n)));

// A JWT's claims, read without checking its signature: the API checks every token it is sent.
export function claimsOf(jwt) {
  const part = jwt.split(".")[1] || "";
  const text = atob(part.replace(/-/g, "+").replace(/_/g, "/"));
  return JSON.parse(decodeURIComponent(escape(text)));
}

export class OidcSession {
  constructor(config, onChange) {
    this.config = config; // {issuer, client_id, scope} from GET /v1/auth/config
    this.onChange = onChange; // a new access token, or null once signed out
    this.access = null;
    this.refresh = null;
    this.timer = null;
  }

  get redirectUri() {
    return `${location.origin}${location.pathname}`;
  }

  async endpoints() {
    if (!this.found) {
      const url = `${this.config.issuer.replace(/\/$/, "")}/.well-known/openid-configuration`;
      const r = await fetch(url, { headers: { Accept: "application/json" } });
      if (!r.ok) throw new Error(`discovery: HTTP ${r.status}`);
      this.found = await r.json();
    }
    return this.found;
  }

  // To the provider: `silent` asks for no page there (prompt=none): back at once, signed in
  // or with login_required.
  async begin({ silent = false } = {}) {
    const { authorization_endpoint: at } = await this.endpoints();
    const verifier = random(48);
    const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
    const trip = { verifier, state: random(16), nonce: random(16), back: location.href, silent };
    sessionStorage.setItem(TRIP, JSON.stringify(trip));
    const query = new URLSearchParams({
      response_type: "code", client_id: this.config.client_id, redirect_uri: this.redirectUri,
      scope: this.config.scope, state: trip.state, nonce: trip.nonce,
      code_challenge: b64url(new Uint8Array(digest)), code_challenge_method: "S256",
    });
    if (silent) query.set("prompt", "none");
    location.assign(`${at}?${query}`);
  }

  // Back from the provider: the tokens for its code ({login, claims}), or null (no trip under
  // way, a silent one that found no session, or an answer that is not ours). The address bar
  // goes back to the page it left.
  async complete() {
    const query = new URLSearchParams(location.search);
    const raw = sessionStorage.getItem(TRIP);
    if (!raw || (!query.has("code") && !query.has("error"))) return null;
    sessionStorage.removeItem(TRIP);
    const trip = JSON.parse(raw);
    history.replaceState(null, "", trip.back);
    if (query.get("state") !== trip.state) throw new Error("sign-in: the state does not match");
    if (query.has("error")) {
      if (trip.silent) return null;
      throw new Error(`sign-in: ${query.get("error")}`);
    }
    const tokens = await this.token({
      grant_type: "authorization_code", code: query.get("code"),
      redirect_uri: this.redirectUri, code_verifier: trip.verifier,
    });
    if (claimsOf(tokens.id_token).nonce !== trip.nonce) {
      throw new Error("sign-in: the nonce does not match");
    }
    return this.adopt(tokens);
  }

  async token(form) {
    const { token_endpoint: at } = await this.endpoints();
    const r = await fetch(at, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", Accept: "application/json" },
      body: new URLSearchParams({ ...form, client_id: this.config.client_id }),
    });
    if (!r.ok) throw new Error(`token endpoint: HTTP ${r.status}`);
    return r.json();
  }

  adopt(tokens) {
    this.access = tokens.access_token;
    this.refresh = tokens.refresh_token || null;
    const claims = claimsOf(this.access);
    clearTimeout(this.timer);
    const left = (tokens.expires_in || 300) * 1000;
    this.timer = setTimeout(() => this.renew(), Math.max(5_000, left - 60_000));
    this.onChange?.(this.access);
    return { login: claims.sub, claims };
  }

  // A new access token before this one runs out: by the refresh token, else silently at the
  // provider (the page goes there and back).
  async renew() {
    try {
      if (!this.refresh) throw new Error("no refresh token");
      this.adopt(await this.token({ grant_type: "refresh_token", refresh_token: this.refresh }));
    } catch {
      await this.begin({ silent: true });
    }
  }

  signOut() {
    clearTimeout(this.timer);
    this.access = this.refresh = null;
    this.onChange?.(null);
  }
}
