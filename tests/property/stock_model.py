"""A plain-Python model of quantity stock (ADR 0022) for the stock state machine: carts of lines
taken by the location rule, the hold automaton of the seat engine (deadline rule, quarantine or
release-and-refund, release with a charge in flight, late captures) moving a cart's units
between the counters, and corrections. Written from the decision records, not from the Lua."""

from dataclasses import dataclass, field

Line = tuple[str, str, int]  # sku, location, quantity
BUCKET = {"H": "held", "B": "blocked", "S": "sold"}


@dataclass
class MHold:
    hold_id: str
    login: str
    lines: list[Line]
    state: str
    expires_ms: int
    bucket: str = "H"  # where its units are: H, B, S, '' (given back)
    charge: str = ""  # in flight
    blocking: str = ""  # RELEASED: the charge its blocked units wait for
    until_ms: int = 0
    winner: str = ""
    given_up: bool = False

    @property
    def listed(self) -> str:
        return ",".join(f"{s}@{loc}*{q}" for s, loc, q in self.lines)


@dataclass
class MCharge:
    charge_id: str
    hold_id: str
    state: str = "CHARGING"
    refund_only: bool = False


@dataclass
class StockModel:
    locations: list[str]
    ttl_ms: int
    quarantine_ms: int
    policy: str  # quarantine | release_refund
    now: int
    cap: int = 0
    stock: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    holds: dict[str, MHold] = field(default_factory=dict)
    charges: dict[str, MCharge] = field(default_factory=dict)
    logins: dict[str, str] = field(default_factory=dict)
    bought: dict[str, int] = field(default_factory=dict)
    corrections: dict[str, tuple[str, str, str, int]] = field(default_factory=dict)

    def add(self, sku: str, on_hand: dict[str, int]) -> None:
        for loc in self.locations:
            n = on_hand.get(loc, 0)
            self.stock[(sku, loc)] = dict(on_hand=n, available=n, held=0, blocked=0, sold=0)

    # -- units ------------------------------------------------------------------------------

    def move(self, h: MHold, to: str) -> None:
        for sku, loc, qty in h.lines:
            c = self.stock[(sku, loc)]
            c[BUCKET[h.bucket]] -= qty
            c[BUCKET[to] if to else "available"] += qty
            assert c[BUCKET[h.bucket]] >= 0
        h.bucket = to

    def end(self, h: MHold, state: str) -> None:
        if state == "CONFIRMED":
            self.bought[h.login] = self.bought.get(h.login, 0) + units(h.lines)
        h.state = state
        if self.logins.get(h.login) == h.hold_id:
            del self.logins[h.login]

    # -- the deadline rule ------------------------------------------------------------------

    def settle(self, h: MHold) -> None:
        if h.state == "RESERVED" and self.now >= h.expires_ms:
            if h.charge and self.policy == "quarantine":
                h.state, h.until_ms = "QUARANTINED", h.expires_ms + self.quarantine_ms
                self.move(h, "B")
            else:
                if h.charge:
                    self.charges[h.charge].refund_only = True
                    h.charge = ""
                self.move(h, "")
                self.end(h, "EXPIRED")
        if h.state == "QUARANTINED" and self.now >= h.until_ms:
            if h.charge:
                self.charges[h.charge].refund_only = True
            h.charge = ""
            self.move(h, "")
            self.end(h, "EXPIRED")
        if h.state == "RELEASED" and h.blocking and self.now >= h.until_ms:
            self.move(h, "")
            h.blocking = ""

    def resolved(self, h: MHold, c: MCharge) -> None:
        if h.charge == c.charge_id:
            h.charge = ""
            if h.state == "QUARANTINED":
                self.move(h, "")
                self.end(h, "EXPIRED")
                return
        if h.state == "RELEASED" and h.blocking == c.charge_id:
            self.move(h, "")
            h.blocking = ""

    # -- operations (each returns the reply code the engine must give) ----------------------

    def claim(self, login: str, hold_id: str, asked: list[tuple[str, int, str]]) -> str:
        prev = self.holds.get(self.logins.get(login, ""))
        if prev is not None:
            self.settle(prev)
            if prev.state == "QUARANTINED" or (prev.state == "RESERVED" and prev.charge):
                return "CHARGE_IN_FLIGHT"
            if prev.state != "RESERVED":
                prev = None
        back = {(s, loc): q for s, loc, q in prev.lines} if prev else {}
        plan: list[Line] = []
        for sku, qty, loc in asked:
            options = [loc] if loc else self.locations
            have = {o: self.stock[(sku, o)]["available"] + back.get((sku, o), 0) for o in options}
            pick = next((o for o in options if have[o] >= qty), None)
            if pick is None:
                return "INSUFFICIENT_STOCK"
            plan.append((sku, pick, qty))
        if self.cap and self.bought.get(login, 0) + units(plan) > self.cap:
            return "LIMIT_EXCEEDED"
        if prev is not None:
            self.move(prev, "")
            self.end(prev, "RELEASED")
        h = MHold(hold_id, login, plan, "RESERVED", self.now + self.ttl_ms)
        for sku, loc, qty in plan:
            self.stock[(sku, loc)]["available"] -= qty
            self.stock[(sku, loc)]["held"] += qty
        self.holds[hold_id] = h
        self.logins[login] = hold_id
        return "OK"

    def release(self, h: MHold) -> str:
        self.settle(h)
        if h.state == "RESERVED":
            if not h.charge:
                self.move(h, "")
            else:
                self.charges[h.charge].refund_only = True
                self.move(h, "B")
                h.blocking, h.charge, h.until_ms = h.charge, "", self.now + self.quarantine_ms
            self.end(h, "RELEASED")
        elif h.state == "QUARANTINED":
            if h.charge:
                self.charges[h.charge].refund_only = True
            h.given_up = True
            if self.logins.get(h.login) == h.hold_id:
                del self.logins[h.login]
        return h.state

    def start_charge(self, h: MHold, charge_id: str) -> str:
        self.settle(h)
        if h.state != "RESERVED":
            return "HOLD_NOT_LIVE"
        if h.charge:
            return "CHARGE_IN_FLIGHT"
        self.charges[charge_id] = MCharge(charge_id, h.hold_id)
        h.charge = charge_id
        return "OK"

    def outcome(self, c: MCharge, captured: bool) -> str:
        h = self.holds[c.hold_id]
        self.settle(h)
        live = h.state in ("RESERVED", "QUARANTINED") and not h.winner and not h.given_up
        if captured and not c.refund_only and live:
            self.move(h, "S")
            c.state, h.winner, h.charge = "CAPTURED", c.charge_id, ""
            self.end(h, "CONFIRMED")
            return "CONFIRMED"
        c.state = "REFUNDING" if captured else "DECLINED"
        self.resolved(h, c)
        return "REFUND" if captured else "DECLINED"

    def sweep(self) -> None:
        for h in self.holds.values():
            self.settle(h)

    def correct(self, cid: str, sku: str, loc: str, mode: str, value: int) -> str:
        body = (sku, loc, mode, value)
        if cid in self.corrections:
            return "REPLAY" if self.corrections[cid] == body else "CORRECTION_ID_REUSED"
        c = self.stock[(sku, loc)]
        after = value if mode == "set" else c["on_hand"] + value
        if c["available"] + after - c["on_hand"] < 0:
            return "BELOW_ZERO"
        c["available"] += after - c["on_hand"]
        c["on_hand"] = after
        self.corrections[cid] = body
        return "APPLIED"


def units(lines: list[Line]) -> int:
    return sum(q for _s, _loc, q in lines)
