"""An operator gives back part of a confirmed order, or all of it (ADR 0043): some seats of a
party or some units of a cart, with a reason. One script call (lua/hold_refund.lua) checks the
goods against the order, puts them back on sale and makes their money a charge of its own
(a part, REFUNDING for exactly their price), so the refund worker returns that amount and the
ledger, the merchant's webhooks and reconciliation see it like any refund.

What a seat costs is its own price (engine/store/prices.py), read here and passed to the script, as
the charge start does; a stock line's price is the SKU's, which the script reads itself."""

from dataclasses import dataclass

from engine.model import errors, keys
from engine.model.replies import HoldRefundCode
from engine.model.stock_lines import StockLine
from engine.model.webhooks import goods
from engine.store.prices import seat_prices
from engine.store.runner import Runner


@dataclass(frozen=True, slots=True)
class OrderRefund:
    charge_id: str  # the part's charge, or (whole) the winner's, now REFUNDING
    amount: int  # minor units given back by this refund
    whole: bool  # everything left was given back: the hold is REVOKED
    replay: bool  # this Idempotency-Key's refund was made before; nothing changed now


def goods_of(seat_ids: list[str] | None, lines: list[StockLine] | None) -> str:
    """The script's goods argument: seat ids, or '<sku>@<location>*<qty>' lines."""
    if lines is not None:
        return ",".join(f"{x.sku}@{x.location}*{x.quantity}" for x in lines)
    return ",".join(seat_ids or ())


class OrderRefunds:
    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    async def refund(
        self,
        event_id: str,
        hold_id: str,
        client_key: str,
        *,
        seat_ids: list[str] | None = None,
        lines: list[StockLine] | None = None,
        reason: str,
    ) -> OrderRefund:
        """Give back the named seats (or stock lines) of a confirmed order; naming all that is
        left gives the whole rest back. Idempotent by `client_key`."""
        hold = await self.runner.reads.hold(event_id, hold_id)
        if not hold.winner:
            raise errors.NotConfirmed(f"hold {hold_id} is {hold.state}", state=str(hold.state))
        part_id = keys.part_id(hold.winner, event_id, hold_id, client_key)
        price = sum(await seat_prices(self.runner, event_id, seat_ids)) if seat_ids else 0
        listed = goods_of(seat_ids, lines)
        reply = await self.runner.run(
            "hold_refund", event_id, [hold_id, part_id, listed, price, reason]
        )
        code = HoldRefundCode(reply[0])
        if code == HoldRefundCode.NOT_FOUND:
            await self.runner.refuse_truthfully(event_id, code)
            raise errors.HoldNotFound(f"hold {hold_id}")
        if code == HoldRefundCode.RECOVERING:
            raise errors.Recovering(f"event {event_id} is being recovered; retry later")
        if code == HoldRefundCode.NOT_CONFIRMED:
            raise errors.NotConfirmed(f"hold {hold_id} is {reply[1]}", state=str(reply[1]))
        if code == HoldRefundCode.NOT_IN_ORDER:
            raise errors.NotInOrder(f"{reply[1]} is not in hold {hold_id}", item=str(reply[1]))
        if code == HoldRefundCode.IDEMPOTENCY_KEY_REUSED:
            raise errors.IdempotencyKeyReused(
                f"refund key of hold {hold_id} reused", first_request=goods(str(reply[1]))
            )
        if code == HoldRefundCode.REPLAY:
            return OrderRefund(reply[1], int(reply[2]), int(reply[3]) == 1, True)
        return OrderRefund(reply[1], int(reply[2]), code == HoldRefundCode.WHOLE, False)
