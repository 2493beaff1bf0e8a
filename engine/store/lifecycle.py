"""An event's sale from open to its end (ADR 0025): open it at T0 (a second open does not move
T0 unless asked, and never once the sale started), close it (no new claim or charge start;
holds run on to their deadlines and callbacks still decide), or cancel it (closed, every hold
ended, the captured money of every sold seat on the refund queue). Each change is one script
call; a cancel is bounded per call (`cancel_step`) and `cancel` repeats it until done."""

from dataclasses import dataclass
from typing import Literal

from engine.model import errors
from engine.model.replies import CancelCode, CloseCode, OpenCode
from engine.store.runner import Runner

CANCEL_BATCH = 200  # holds one event_cancel call examines: a few ms, buyers go between
CANCEL_CALLS_MAX = 50  # calls one `cancel` makes before handing back what remains


@dataclass(frozen=True, slots=True)
class CancelProgress:
    done: int  # holds moved by these calls
    remaining: int  # units (seats) still held, blocked or sold: 0 once the cancel is complete
    calls: int

    @property
    def complete(self) -> bool:
        return self.remaining == 0


class Lifecycle:
    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    async def open(self, event_id: str, opens_at_ms: int = 0, *, reschedule: bool = False) -> int:
        """Open the sale at `opens_at_ms` (0: now); returns T0. An open event answers
        AlreadyOpen unless `reschedule`, and SaleStarted once T0 passed."""
        args = [opens_at_ms, "1" if reschedule else "0"]
        reply = await self.runner.run("event_open", event_id, args)
        code = OpenCode(reply[0])
        if code == OpenCode.NOT_FOUND:
            raise errors.EventNotFound(event_id)
        if code == OpenCode.CLOSED:
            raise errors.SaleClosed(f"event {event_id} is {reply[1]}", sale_status=str(reply[1]))
        if code == OpenCode.ALREADY_OPEN:
            raise errors.AlreadyOpen(f"event {event_id} is open", opens_at_ms=int(reply[1]))
        if code == OpenCode.STARTED:
            raise errors.SaleStarted(f"event {event_id} started", opens_at_ms=int(reply[1]))
        return int(reply[1])

    async def close(self, event_id: str, actor: str) -> Literal["closed", "cancelled"]:
        """Close the sale; returns the status (`closed`, or `cancelled` if it was)."""
        reply = await self.runner.run("event_close", event_id, [actor])
        code = CloseCode(reply[0])
        if code == CloseCode.NOT_FOUND:
            raise errors.EventNotFound(event_id)
        if code == CloseCode.FENCED:
            raise errors.Recovering(f"event {event_id} is being recovered; retry later")
        return "cancelled" if reply[1] == "cancelled" else "closed"  # the script says no other

    async def cancel_step(
        self, event_id: str, actor: str, batch: int = CANCEL_BATCH
    ) -> CancelProgress:
        """One bounded event_cancel call."""
        reply = await self.runner.run("event_cancel", event_id, [actor, batch])
        code = CancelCode(reply[0])
        if code == CancelCode.NOT_FOUND:
            raise errors.EventNotFound(event_id)
        if code == CancelCode.FENCED:
            raise errors.Recovering(f"event {event_id} is being recovered; retry later")
        return CancelProgress(int(reply[1]), int(reply[2]), 1)

    async def cancel(
        self,
        event_id: str,
        actor: str,
        *,
        batch: int = CANCEL_BATCH,
        calls_max: int = CANCEL_CALLS_MAX,
    ) -> CancelProgress:
        """Cancel the event, calling event_cancel until nothing remains or `calls_max` calls
        were made (then `remaining` > 0: call again)."""
        done = calls = 0
        while True:
            step = await self.cancel_step(event_id, actor, batch)
            done, calls = done + step.done, calls + 1
            if step.complete or calls >= calls_max:
                return CancelProgress(done, step.remaining, calls)
