"""The simulator's own wire: its facts as they are, signed with Onsale-Signature (the engine's
SimulatorProvider reads it). Stripe's wire is loadtest/provider_sim/stripe.py."""

import time
from typing import Any

from engine.model.signing import HEADER, sign
from loadtest.provider_sim.attempt import Attempt
from loadtest.provider_sim.charges import Simulator


class NativeWire:
    """The simulator's own protocol: its facts as they are, signed with Onsale-Signature."""

    name, attempt_prefix, intent_prefix = "native", "att_", "pi_"

    def event(
        self,
        sim: Simulator,
        kind: str,
        a: Attempt,
        data: dict[str, Any],
        overrides: dict[str, Any],
    ) -> dict[str, Any]:
        data = {**data, **overrides.get("data", {})}
        if "metadata" in overrides:
            data["metadata"] = {**a.metadata, **overrides["metadata"]}
        return {"id": sim.new_id("evt"), "type": kind, "created": int(time.time()), "data": data}

    def signature(self, secret: str, body: bytes, timestamp: int) -> tuple[str, str]:
        return HEADER, sign(secret, body, timestamp)
