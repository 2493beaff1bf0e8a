"""The state changes: each is exactly one script call; results come back as typed outcomes, refusals
as EngineError subclasses (engine/model/errors.py). Reads are `store.read` (engine/store/reads.py),
putting an event back from the ledger is `store.restore` (engine/store/restore.py), and the audit of
the invariants is engine/model/audit.py. Nothing else in the engine talks to Redis."""

from collections.abc import Iterable
from typing import Any, Unpack

import redis.asyncio as aioredis

from engine.model import errors, keys
from engine.model.event_config import EventConfig
from engine.model.holds import (
    ChargeStarted,
    Claimed,
    LoginLimits,
    OutcomeResult,
    ProviderOutcome,
    ProviderReversal,
    SeatSpec,
    SweepResult,
)
from engine.model.replies import (
    CHARGE_START_REFUSALS,
    CLAIM_REFUSALS,
    AbandonCode,
    ChargeStartCode,
    ClaimCode,
    EventCreateCode,
    FenceCode,
    OutcomeCode,
    RefundCode,
    ReindexCode,
    ReleaseCode,
    ReversalCode,
    RevokeCode,
    SeatsAddCode,
    SweepCode,
    refusal,
)
from engine.model.states import (
    ChargeState,
    HoldState,
)
from engine.model.stock_lines import GOODS, Goods, claim_want
from engine.store.lifecycle import Lifecycle
from engine.store.notes import Notes
from engine.store.order_refunds import OrderRefunds
from engine.store.pipeline import AutoPipeline
from engine.store.presales import Presales
from engine.store.prices import PriceBook, save_prices
from engine.store.reads import Reads
from engine.store.replicas import ReplicaWait
from engine.store.restore import Restore
from engine.store.revoked import RevokedLogins
from engine.store.runner import Runner
from engine.store.scripts import Scripts
from engine.store.stock import Stock

SEATS_CHUNK_MAX = 500  # seats per event_seats_add call (<= 1000): a few ms, buyers go between


class Store:
    def __init__(
        self,
        client: "aioredis.Redis",
        *,
        scripts: Scripts | None = None,
        prefix: str = keys.PREFIX,
        timeout_s: float = 2.0,
        autopipeline: bool = True,
        limits: LoginLimits | None = None,
        idempotency_window_ms: int = 0,
        hold_record: str = "sparse",  # "full": every field, for older readers (ADR 0034)
        wait: ReplicaWait | None = None,  # answer only what replicas hold (store/replicas.py)
    ) -> None:
        encoder = client.get_encoder()  # type: ignore[no-untyped-call]
        assert encoder.decode_responses, "Store needs a client with decode_responses=True"
        self.client = client
        self.scripts = scripts or Scripts(client)
        self.prefix = prefix
        self.limits = limits = limits or LoginLimits()
        # What every claim passes after its hold id, login and want (lua/hold_claim.lua ARGV[4..8];
        # a window of 0: a claim's hold id is its idempotency key; else key + window).
        self.claim_limits = [
            limits.claims_per_s, limits.claims_burst, limits.cap, idempotency_window_ms,
            "full" if hold_record == "full" else "",
        ]  # fmt: skip
        self._charge_limits = [limits.charges_per_s, limits.charges_burst]
        window = idempotency_window_ms
        self.read = Reads(client, prefix=prefix, timeout_s=timeout_s, window_ms=window)  # views
        # Script calls of one event-loop tick share one round trip (engine/store/pipeline.py).
        self.pipeline = (AutoPipeline(client, self.scripts, timeout_s=timeout_s, wait=wait)
                         if autopipeline else None)  # fmt: skip
        # The plumbing under the store and each facet (engine/store/runner.py).
        self.runner = runner = Runner(client, self.scripts, self.read, prefix=prefix,
                                      timeout_s=timeout_s, pipeline=self.pipeline)  # fmt: skip
        self.restore = Restore(runner)  # rebuild from the ledger
        self.revoked = RevokedLogins(client, prefix=prefix, timeout_s=timeout_s)  # identity
        self.read.pipeline = self.pipeline  # a request's reads go with its script calls
        self.notes = Notes(client, prefix=prefix, timeout_s=timeout_s, pipeline=self.pipeline)
        self.stock = Stock(runner)  # quantity stock: create, correct, read (ADR 0022)
        self.lifecycle = Lifecycle(runner)  # open, close, cancel (ADR 0025)
        self.order_refunds = OrderRefunds(runner)  # an order's money given back (ADR 0043)
        self.prices = PriceBook(runner)  # each event's seat prices, kept (ADR 0038)
        self.presales = Presales(runner)  # presale windows and access codes (ADR 0049)

    # -- plumbing -------------------------------------------------------------------------

    @property
    def timeout_s(self) -> float:
        """A call's whole wait (engine/store/runner.py), the same for the store and its facets."""
        return self.runner.timeout_s

    @timeout_s.setter
    def timeout_s(self, value: float) -> None:
        self.runner.timeout_s = value

    def keys(self, event_id: str) -> list[str]:
        return self.runner.keys(event_id)

    # -- events ---------------------------------------------------------------------------

    async def create_event(
        self,
        event_id: str,
        seats: Iterable[SeatSpec],
        config: EventConfig,
        *,
        price_minor: int = 0,
    ) -> int:
        """Create a DRAFT event sold under `config`, its seats' own prices, then its seats in
        chunks; returns the number of seats."""
        await self.read.index.add(event_id)  # first: a create cut short is still walked
        reply = await self.runner.run(
            "event_create", event_id, [event_id, *config.script_args("seats")]
        )
        if reply[0] == EventCreateCode.EXISTS:
            raise errors.EventExists(f"event {event_id} exists")
        # Prices are no script's input (engine/store/prices.py): set after the create, on a DRAFT.
        await self.runner.timed(
            self.client.hset(self.key(event_id, "event"), "price_minor", price_minor)
        )
        await save_prices(self.runner, event_id, seats := list(seats))
        total = 0
        batch: list[Any] = []
        for seat in seats:
            if not keys.valid_id(seat.seat_id):
                raise ValueError(f"invalid seat id {seat.seat_id!r}")
            batch += [seat.seat_id, seat.rank, seat.section]
            if len(batch) >= 3 * SEATS_CHUNK_MAX:
                total += await self._add_seats(event_id, batch)
                batch = []
        if batch:
            total += await self._add_seats(event_id, batch)
        return total

    async def _add_seats(self, event_id: str, batch: list[Any]) -> int:
        reply = await self.runner.run("event_seats_add", event_id, batch)
        code = SeatsAddCode(reply[0])
        if code == SeatsAddCode.DUPLICATE_SEAT:
            raise ValueError(f"duplicate seat {reply[1]!r}")
        if code != SeatsAddCode.ADDED:
            raise errors.EventNotFound(f"cannot add seats to {event_id}: {code}")
        return int(reply[1])

    async def open_sale(self, event_id: str, opens_at_ms: int = 0) -> int:
        return await self.lifecycle.open(event_id, opens_at_ms)  # engine/store/lifecycle.py

    def key(self, event_id: str, name: str) -> str:
        return self.runner.key(event_id, name)

    # -- holds ----------------------------------------------------------------------------

    async def claim(
        self, event_id: str, login: str, hold_id: str, seat_id: str | None = None,
        **goods: Unpack[Goods],
    ) -> Claimed:  # fmt: skip
        """Claim `seat_id` (or all of `seats`), or else the `quantity` best free seats (adjacent
        when a block is free), or the stock `lines` of a stock event (all or nothing, ADR 0022).
        `hold_id` is the idempotency key (a window's hold id is made from it). Before T0, in a
        presale window, `access_code` is spent (ADR 0049)."""
        if not keys.valid_id(hold_id) or not login:
            raise ValueError("hold_id and login are required")
        if not goods.keys() <= GOODS:  # a misspelt keyword is an error, never "the best seat"
            raise TypeError(f"claim() got unexpected arguments {sorted(goods.keys() - GOODS)}")
        want = claim_want(seat_id, goods)
        args = [hold_id, login, want, *self.claim_limits, goods.get("access_code", "")]
        reply = await self.runner.run("hold_claim", event_id, args)
        code = ClaimCode(reply[0])
        if code in (ClaimCode.OK, ClaimCode.REPLAY):
            return Claimed.of_reply(reply)
        await self.runner.refuse_truthfully(event_id, code)
        raise refusal(CLAIM_REFUSALS, code, reply)

    async def release(self, event_id: str, hold_id: str, login: str) -> HoldState:
        """Give a hold up. Returns the hold's state afterwards (idempotent)."""
        reply = await self.runner.run("hold_release", event_id, [hold_id, login])
        code = ReleaseCode(reply[0])
        if code in (ReleaseCode.RELEASED, ReleaseCode.ALREADY_TERMINAL):
            return HoldState(reply[1])
        if code == ReleaseCode.NOT_OWNER:
            raise errors.NotOwner(f"hold {hold_id} is not yours")
        raise errors.HoldNotFound(f"hold {hold_id}")

    async def reindex(self, event_id: str) -> None:
        """The event's scores in the indexes across events set to exactly its first work of
        each kind (a worker found it with nothing to do: lua/event_reindex.lua)."""
        reply = await self.runner.run("event_reindex", event_id, [])
        if ReindexCode(reply[0]) == ReindexCode.NOT_FOUND:
            raise errors.EventNotFound(event_id)

    async def sweep(self, event_id: str, batch_max: int = 200) -> SweepResult:
        """One expire-if-still-held step over the overdue holds (by the server clock)."""
        return await self._sweep("hold_expire", event_id, batch_max)

    async def sweep_quarantine(self, event_id: str, batch_max: int = 200) -> SweepResult:
        """One quarantine hard-timeout step."""
        return await self._sweep("hold_quarantine_timeout", event_id, batch_max)

    async def _sweep(self, name: str, event_id: str, batch_max: int) -> SweepResult:
        reply = await self.runner.run(name, event_id, [batch_max])
        if reply[0] == SweepCode.NOT_FOUND:
            raise errors.EventNotFound(event_id)
        return SweepResult(int(reply[1]), int(reply[2]), int(reply[3]), int(reply[4]))

    # -- charges --------------------------------------------------------------------------

    async def start_charge(
        self, event_id: str, hold_id: str, login: str, charge_id: str, amount: int
    ) -> ChargeStarted:
        if not keys.valid_charge_id(charge_id):
            raise ValueError(f"invalid charge id {charge_id!r}")
        reply = await self.runner.run(
            "charge_start", event_id, [hold_id, login, charge_id, amount, *self._charge_limits]
        )
        code = ChargeStartCode(reply[0])
        if code == ChargeStartCode.OK:
            return ChargeStarted(reply[1], int(reply[2]), False, ChargeState.CHARGING)
        if code == ChargeStartCode.REPLAY:
            return ChargeStarted(reply[1], 0, True, ChargeState(reply[2]))
        if code == ChargeStartCode.HOLD_NOT_LIVE:
            state = HoldState(reply[1])
            if state == HoldState.CONFIRMED:
                raise errors.AlreadyConfirmed(f"hold {hold_id} is confirmed")
            raise errors.HoldExpired(f"hold {hold_id} is {state}", state=state)
        await self.runner.refuse_truthfully(event_id, code)
        raise refusal(CHARGE_START_REFUSALS, code, reply)

    async def fence(self, event_id: str, reason: str, ledger_seq: int | None = None) -> FenceCode:
        """Stop deciding for the event until rebuilt (ADR 0017): never while it is rebuilt, nor
        once its number reached `ledger_seq`."""
        seq = "" if ledger_seq is None else ledger_seq
        return FenceCode((await self.runner.run("event_fence", event_id, [reason, seq]))[0])

    async def abandon_charge(self, event_id: str, hold_id: str, login: str, charge_id: str) -> bool:
        """The client stopped waiting for `charge_id`: True once it is resolve-by-refund (now or
        before; the hold may pay again). Not in flight: ChargeCaptured or ChargeNotInFlight."""
        reply = await self.runner.run("charge_abandon", event_id, [hold_id, login, charge_id])
        code = AbandonCode(reply[0])
        if code == AbandonCode.NOT_OWNER:
            raise errors.NotOwner(f"hold {hold_id} is not yours")
        if code == AbandonCode.NOT_FOUND:
            raise errors.ChargeNotFound(f"charge {charge_id} on hold {hold_id}")
        if code == AbandonCode.NOT_IN_FLIGHT:
            refusal = errors.ChargeCaptured if reply[1] == "CAPTURED" else errors.ChargeNotInFlight
            raise refusal(f"abandon {charge_id}: {reply[1]}", charge_state=ChargeState(reply[1]))
        return True

    async def apply_outcome(self, event_id: str, outcome: ProviderOutcome) -> OutcomeResult:
        """Verify one authenticated provider message against our charge and apply it
        (confirm-if-charge-wins). Replays of the same provider event id return the first
        result with first_seen=False."""
        reply = await self.runner.run(
            "charge_outcome_v2",
            event_id,
            [
                outcome.provider_event_id,
                outcome.charge_id,
                outcome.attempt_id,
                outcome.intent_id,
                outcome.outcome,
                outcome.status or outcome.outcome.lower(),
                "invalid" if outcome.amount is None else outcome.amount,
                outcome.currency,
                outcome.meta_event or event_id,
                outcome.meta_hold,
                outcome.meta_charge,
            ],
        )
        code = OutcomeCode(reply[0])
        if code == OutcomeCode.NOT_FOUND:
            await self.runner.refuse_truthfully(event_id, code)  # lost: the provider retries later
            raise errors.EventNotFound(event_id)
        if code == OutcomeCode.RETRY_LATER:  # the event is being rebuilt: nothing was recorded
            raise errors.Recovering(f"event {event_id} is being rebuilt; retry later")
        return OutcomeResult.of_reply(code, reply)

    async def apply_reversal(self, event_id: str, reversal: ProviderReversal) -> OutcomeResult:
        """Money the provider moved after a capture (a refund, a dispute), verified against
        the charge; once per provider event id."""
        reply = await self.runner.run(
            "charge_reversal",
            event_id,
            [
                reversal.provider_event_id,
                reversal.charge_id,
                reversal.attempt_id,
                reversal.kind,
                "invalid" if reversal.amount is None else reversal.amount,
                reversal.currency,
                reversal.meta_event or event_id,
            ],
        )
        code = ReversalCode(reply[0])
        if code == ReversalCode.NOT_FOUND:
            await self.runner.refuse_truthfully(event_id, code)
            raise errors.EventNotFound(event_id)
        if code == ReversalCode.RETRY_LATER:  # the event is being rebuilt: nothing was recorded
            raise errors.Recovering(f"event {event_id} is being rebuilt; retry later")
        return OutcomeResult.of_reply(code, reply)

    async def revoke_hold(self, event_id: str, hold_id: str, actor: str) -> None:
        """An operator takes back the seat of a hold in EXCEPTION (its money left)."""
        reply = await self.runner.run("hold_revoke", event_id, [hold_id, actor])
        code = RevokeCode(reply[0])
        if code == RevokeCode.NOT_FOUND:
            raise errors.HoldNotFound(f"hold {hold_id}")
        if code == RevokeCode.NOT_EXCEPTION:
            raise errors.NotAnException(f"hold {hold_id} is {reply[1]}, not EXCEPTION")

    async def refund_result(
        self, event_id: str, charge_id: str, *, refunded: bool, retry_delay_ms: int = 0
    ) -> RefundCode:
        result = "REFUNDED" if refunded else "FAILED"
        return (await self._refund(event_id, charge_id, result, retry_delay_ms))[0]

    async def park_refund(self, event_id: str, charge_id: str, why: str) -> RefundCode:
        """Stop a refund the provider disowns; the charge stays REFUNDING, alerted, for a person."""
        return (await self._refund(event_id, charge_id, "PARKED", 0, why))[0]

    async def retry_refund(self, event_id: str, charge_id: str) -> tuple[int, bool]:
        """A person's "retry this refund": due now, unparked; (attempts, was parked)."""
        code, reply = await self._refund(event_id, charge_id, "RETRY", 0)
        if code == RefundCode.NOT_REFUNDING:
            raise errors.NotRefunding(f"charge {charge_id} is {reply[1]}, not REFUNDING")
        return int(reply[1]), int(reply[2]) == 1

    async def _refund(self, event: str, charge: str, *args: Any) -> tuple[RefundCode, list[Any]]:
        reply = await self.runner.run("charge_refund", event, [charge, *args, ""][:4])
        code = RefundCode(reply[0])
        if code == RefundCode.NOT_FOUND:
            raise errors.ChargeNotFound(f"charge {charge}")
        return code, reply

    async def boot(self) -> bool:
        """Load every script (one that does not compile fails the boot); False when Redis is down,
        an outage (503s, loops retry, scripts load on first use), never a reason to exit."""
        try:
            await self.ready()
        except errors.StoreUnavailable:
            return False
        return True

    async def ready(self) -> int:
        """Redis answers and has the library (loaded again if a restart lost it)."""
        if not await self.runner.timed(self.scripts.loaded()):
            await self.runner.timed(self.scripts.load_all())
        return len(self.scripts.names())
