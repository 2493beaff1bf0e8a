"""Putting an event back from the ledger after Redis lost it (persistence/rebuild.py): one
script call per restored hold or charge, while the event is a DRAFT."""

from engine.model import keys
from engine.model.holds import Charge
from engine.model.replies import RestoreCode
from engine.model.states import HoldState
from engine.store.runner import Runner


class Restore:
    def __init__(self, runner: Runner) -> None:
        self.reads = runner.reads
        self.client, self.prefix = runner.client, runner.prefix
        self._run, self._read, self._key = runner.run, runner.timed, runner.key
        self._script_keys = runner.keys

    async def drop_event(self, event_id: str) -> None:
        """Delete every key of the event (a rebuild with --force starts from nothing)."""
        names = [*keys.EVENT_KEYS, *keys.EXTRA_KEYS]
        await self._read(self.client.delete(*(self._key(event_id, n) for n in names)))
        indexes = self._script_keys(event_id)[len(keys.EVENT_KEYS) :]  # every index across events
        for index in indexes:
            await self._read(self.client.zrem(index, event_id))
        await self.reads.index.remove(event_id)

    async def hold(
        self,
        event_id: str,
        hold_id: str,
        login: str,
        seat_id: str,
        winner: str,
        decided_ms: int,
        state: HoldState = HoldState.CONFIRMED,
    ) -> RestoreCode:
        reply = await self._run(
            "event_restore",
            event_id,
            ["HOLD", hold_id, login, seat_id, winner, decided_ms, str(state)],
        )
        return RestoreCode(reply[0])

    async def stock(self, event_id: str, sku: str, location: str, on_hand: int) -> RestoreCode:
        """A location's on-hand count (the ledger's last correction), before any sale."""
        reply = await self._run("event_restore", event_id, ["STOCK", sku, location, on_hand])
        return RestoreCode(reply[0])

    async def correction(self, event_id: str, correction_id: str, recorded: str) -> RestoreCode:
        """A correction applied before the loss (its json: body, before, after, at_ms), so
        that its replay is answered as one."""
        reply = await self._run("event_restore", event_id, ["CORRECTION", correction_id, recorded])
        return RestoreCode(reply[0])

    async def charge(self, event_id: str, charge: Charge) -> RestoreCode:
        reply = await self._run(
            "event_restore",
            event_id,
            [
                "CHARGE",
                charge.charge_id,
                str(charge.state),
                charge.hold_id,
                charge.seat_id,
                charge.login,
                charge.amount,
                charge.attempt_id,
                charge.intent_id,
                charge.decided_ms,
                int(charge.refund_only),
                charge.captured,
                charge.key,
                int(charge.final),
                charge.part_of,
                charge.parted,
            ],
        )
        return RestoreCode(reply[0])

    async def begin(self, event_id: str, last_seq: int) -> None:
        """The first write of a rebuild, before the event exists again: marked rebuilding (the
        ledger writer's look and a fence leave it alone, reads answer "recovering") and its
        decisions numbered after the ledger's last one, so a decision made while it is rebuilt
        (the refund worker acting on a restored refund) never takes a number the ledger holds."""
        event = self._key(event_id, "event")
        await self._read(self.client.hset(event, items=["rebuilding", "1", "seq", last_seq]))
        await self._read(self.client.hdel(keys.lost_events(self.prefix), event_id))

    async def mark(self, event_id: str, at_ms: int) -> None:
        """Decisions older than this were not made by this Redis: the outbox does not hold them
        (the ledger does), and the audit does not expect them there (ADR 0017)."""
        await self._read(self.client.hset(self._key(event_id, "event"), "restored_at_ms", at_ms))

    async def half_built(self, event_id: str) -> bool:
        """A rebuild began and did not finish (it failed, or its process died)."""
        flag = await self._read(self.client.hget(self._key(event_id, "event"), "rebuilding"))
        return flag in ("1", b"1")

    async def mark_refused(self, event_id: str, hold_id: str, reason: str) -> None:
        """The ledger refused a decision of this hold: its sale, if it has one, is never told."""
        await self._read(self.client.hset(self._key(event_id, "refused"), hold_id, reason))

    async def mark_lost(self, event_id: str) -> None:
        """The ledger has the event and this Redis does not: until it is rebuilt, a read or
        claim of it answers "recovering" (ADR 0017)."""
        now_ms = await self.reads.server_time_ms()
        await self._read(self.client.hsetnx(keys.lost_events(self.prefix), event_id, now_ms))

    async def rebuilding(self, event_id: str, *, on: bool) -> None:
        """While on, a not-found or not-open answer for the event says "recovering" (503);
        the event is no longer lost once its rebuild starts."""
        event = self._key(event_id, "event")
        if on:
            await self._read(self.client.hset(event, "rebuilding", "1"))
            await self._read(self.client.hdel(keys.lost_events(self.prefix), event_id))
        else:
            await self._read(self.client.hdel(event, "rebuilding"))
            await self._read(self.client.hdel(keys.lost_events(self.prefix), event_id))
