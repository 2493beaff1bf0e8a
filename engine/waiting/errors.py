"""The refusals of the waiting room (ADR 0029). Their HTTP statuses are in api/errors.py STATUS,
beside every other code; what a client is told is each class's summary."""

from engine.model.errors import EngineError


class NoWaitingRoom(EngineError):
    code = "no_waiting_room"
    summary = "this event has no waiting room: claim directly"


class NotInQueue(EngineError):
    code = "not_in_queue"
    summary = "this login has no place in the event's waiting room: join it first"


class QueueFull(EngineError):
    code = "queue_full"
    summary = "the event's waiting room holds as many places as it can"


class AdmissionRequired(EngineError):
    code = "admission_required"
    summary = (
        "this event has a waiting room: claim with the admission its queue gave you "
        "(header Onsale-Admission), once your place is admitted"
    )


class AdmissionInvalid(EngineError):
    code = "admission_invalid"
    summary = "this admission was not given to this login for this event"


class AdmissionUsed(EngineError):
    code = "admission_used"
    summary = (
        "this admission was spent by another claim (to retry that claim, send its "
        "Idempotency-Key again)"
    )


class AdmissionExpired(EngineError):
    code = "admission_expired"
    summary = "this admission is over: join the queue again for a new place at its end"
