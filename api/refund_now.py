"""A refund this process decided is asked of the provider at once, after the answer has gone
out (ADR 0045): the money goes back in the time of one provider call, whether the worker is up
or not. The worker's refund queue stays the backstop (a process that dies before it sends, a
provider that did not answer: the retry is the worker's) and two senders of one refund ask for
the same refund, by its key, and record the same fact."""

import logging

from starlette.background import BackgroundTask
from starlette.responses import Response

from api.context import Context
from engine.model.errors import StoreUnavailable
from engine.model.holds import OutcomeResult
from engine.model.replies import OutcomeCode
from engine.model.states import ChargeState

log = logging.getLogger("onsale.api")


def decided_refund(result: OutcomeResult) -> bool:
    """The callback's first copy made a refund due: a late or contradicting capture, a capture
    after its refund, money of no charge of ours."""
    refund = result.decision == OutcomeCode.REFUND or result.charge_state == ChargeState.REFUNDING
    return result.first_seen and bool(result.charge_id) and refund


def refund_after(response: Response, c: Context, event_id: str, charge_id: str) -> Response:
    """`response`, which sends `charge_id`'s refund once it has been answered."""
    response.background = BackgroundTask(_send, c, event_id, charge_id)
    return response


async def _send(c: Context, event_id: str, charge_id: str) -> None:
    try:
        await c.refunds.send(event_id, charge_id)
    except StoreUnavailable as exc:  # the refund stays due: the worker sends it
        log.warning("refund of %s/%s left to the worker: %s", event_id, charge_id, exc)
        return
    c.metrics.decisions.labels("refund_asked_at_once").inc()
