"""Presale access codes (ADR 0049): an event may have presale windows before T0, in which a
claim needs one of the window's codes. Codes are added in bulk (lua/codes_add.lua, all or
nothing, one outbox record a batch) and spent inside the claim script (lua/hold_claim.lua):
a code is spent by at most `uses` holds live or sold, `per_login` of them by one login; a
hold that ends without a sale gives its use back. The codes live in the event's `codes` hash
(its layout: lua/_lib.lua)."""

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from engine.model import errors
from engine.model.replies import CodesAddCode, RestoreCode
from engine.store.runner import Runner

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read aloud, typed by hand
CODE_LENGTH = 10  # 32^10 = 2^50 codes: guessing one of a million takes 2^30 tries


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


@dataclass(frozen=True, slots=True)
class Presale:
    """A presale window: a claim before T0 in it needs one of its codes."""

    name: str
    opens_at_ms: int
    closes_at_ms: int


@dataclass(frozen=True, slots=True)
class AccessCode:
    code: str
    presale: str
    uses: int  # holds it may be spent by, live or sold
    per_login: int  # by one login (0: no limit of its own)
    expires_ms: int
    used: int  # spent now: live holds and sales


@dataclass(frozen=True, slots=True)
class Added:
    added: int  # codes new in this batch
    existing: int  # codes that were there already with the same terms (a batch sent again)


class Presales:
    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    async def add(
        self,
        event_id: str,
        window: Presale,
        codes: Sequence[str],
        *,
        uses: int,
        per_login: int,
        expires_ms: int,
        batch_id: str,
    ) -> Added:
        """Add `codes` to the presale `window` (created by its first batch), all or none."""
        args = [
            window.name, window.opens_at_ms, window.closes_at_ms, uses, per_login, expires_ms,
            batch_id, *codes,
        ]  # fmt: skip
        reply = await self.runner.run("codes_add", event_id, args)
        code = CodesAddCode(reply[0])
        if code == CodesAddCode.OK:
            return Added(int(reply[1]), int(reply[2]))
        if code == CodesAddCode.NOT_FOUND:
            raise errors.EventNotFound(event_id)
        if code == CodesAddCode.CLOSED:
            raise errors.SaleClosed("closed", sale_status=str(reply[1]))
        if code == CodesAddCode.PRESALE_MISMATCH:
            raise errors.PresaleMismatch(
                window.name, opens_at_ms=int(reply[1]), closes_at_ms=int(reply[2])
            )
        raise errors.AccessCodeExists(str(reply[1]), access_code=str(reply[1]))

    async def windows(self, event_id: str) -> list[Presale]:
        raw = await self.runner.timed(
            self.runner.client.hget(self.runner.key(event_id, "codes"), "presales")
        )
        found: dict[str, list[int]] = orjson.loads(raw) if raw else {}
        return sorted(
            (Presale(name, int(w[0]), int(w[1])) for name, w in found.items()),
            key=lambda p: (p.opens_at_ms, p.name),
        )

    async def codes(self, event_id: str) -> list[AccessCode]:
        """Every code of the event with its uses now, by presale and code (a presale's codes
        number in the thousands: read in one pass of HSCAN)."""
        key = self.runner.key(event_id, "codes")
        fields: dict[str, str] = {}
        cursor: Any = 0
        while True:
            cursor, page = await self.runner.timed(
                self.runner.client.hscan(key, cursor, count=1000)
            )
            fields.update(page)
            if int(cursor) == 0:
                break
        found = []
        for name, raw in fields.items():
            if name.startswith("c:"):
                code, terms = name[2:], orjson.loads(raw)
                found.append(
                    AccessCode(
                        code, terms["presale"], int(terms["uses"]), int(terms["per_login"]),
                        int(terms["expires_ms"]), int(fields.get(f"u:{code}", 0)),
                    )
                )  # fmt: skip
        return sorted(found, key=lambda c: (c.presale, c.code))

    async def restore(self, event_id: str, blob: dict[str, Any]) -> RestoreCode:
        """The presales and codes from the ledger, their uses those of the sales it holds, while
        the rebuilt event is a DRAFT (lua/event_restore.lua CODES)."""
        reply = await self.runner.run("event_restore", event_id, ["CODES", orjson.dumps(blob)])
        return RestoreCode(reply[0])
