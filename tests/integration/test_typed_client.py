"""A typed client generated from the OpenAPI document runs the purchase flow against the real
stack (ADR 0026): openapi-python-client writes it into a temporary directory at test time
(nothing generated is kept in the repository), and the flow uses only its functions and
models: an admin creates and opens an event, a buyer logs in (demo login), reads the event,
claims two seats, starts the charge, the provider simulator captures, and the buyer reads the
hold until it is CONFIRMED with its order. A refusal comes back as the typed error, its code
one of the document's."""

import contextlib
import importlib
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import orjson
import pytest

from api.openapi import OPENAPI
from tests.integration.conftest import ADMIN, Stack

pytestmark = [pytest.mark.redis, pytest.mark.slow]

GENERATOR = Path(sys.executable).parent / "openapi-python-client"
PACKAGE = "onsale_client"
# No formatting hooks (the generated code is never kept), one package name whatever the title.
CONFIG = {"post_hooks": [], "package_name_override": PACKAGE, "project_name_override": PACKAGE}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The generated package, importable as `onsale_client` while the module's tests run."""
    out = tmp_path_factory.mktemp("typed-client")
    document, config = out / "openapi.json", out / "config.json"
    document.write_bytes(orjson.dumps(OPENAPI))
    config.write_bytes(orjson.dumps(CONFIG))  # JSON is YAML: the generator reads either
    command = [str(GENERATOR), "generate", "--path", str(document), "--config", str(config),
               "--meta", "none", "--output-path", str(out / PACKAGE)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Warning" not in done.stdout, done.stdout  # every schema became a typed model
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def _of(package: str, name: str) -> Any:
    return importlib.import_module(f"{PACKAGE}.{package}.{name}")


def test_a_generated_client_buys_two_seats(client: ModuleType, stack: Stack) -> None:
    stack.sim_config(decline_rate=0.0, fail_rate=0.0, late_rate=0.0, loss_rate=0.0)
    models = importlib.import_module(f"{PACKAGE}.models")
    base = {"base_url": stack.api, "raise_on_unexpected_status": True, "timeout": httpx.Timeout(10)}
    clients = contextlib.ExitStack()  # every client's connections are closed at the end
    with clients:
        admin = clients.enter_context(client.AuthenticatedClient(token=ADMIN, **base))
        public = clients.enter_context(client.Client(**base))
        event_id = f"typed-{uuid.uuid4().hex[:8]}"
        seats = [models.SeatSpec(seat_id=f"s{i}", rank=i, section="A") for i in range(4)]
        new = models.CreateEventRequest(event_id=event_id, seats=seats, price_minor=4500)
        created = _of("api.admin", "create_event").sync(client=admin, body=new)
        assert (created.kind, created.seats) == (models.EventKind.SEATS, 4)
        opened = _of("api.admin", "open_sale").sync(event_id, client=admin)
        assert isinstance(opened, models.SaleOpened) and opened.opens_at_ms > 0

        asked = models.LoginRequest(login="typed-buyer", event_id=event_id)
        token = _of("api.buyer", "login").sync(client=public, body=asked)
        assert isinstance(token, models.LoginToken) and token.event_id == event_id
        buyer = clients.enter_context(client.AuthenticatedClient(token=token.token, **base))
        event = _of("api.buyer", "get_event").sync(event_id, client=public)
        assert (event.status, event.free, event.price_minor) == ("open", 4, 4500)
        _buy(models, buyer, event_id)


def _buy(models: ModuleType, buyer: Any, event_id: str) -> None:
    """Claim two seats (and the claim again), pay, read the hold until it is sold."""
    claim = _of("api.buyer", "claim_hold")
    asked = models.ClaimRequest(quantity=2)
    first = claim.sync_detailed(event_id, client=buyer, body=asked, idempotency_key="typed-1")
    held = first.parsed
    assert first.status_code == 201 and isinstance(held, models.Claimed)
    assert (held.seat_ids, held.state) == (["s0", "s1"], models.HoldState.RESERVED)
    again = claim.sync_detailed(event_id, client=buyer, body=asked, idempotency_key="typed-1")
    assert (again.status_code, again.parsed.hold_id) == (200, held.hold_id)  # the same hold

    started = _of("api.buyer", "start_charge").sync_detailed(event_id, held.hold_id, client=buyer)
    charge = started.parsed
    assert started.status_code == 202 and isinstance(charge, models.ChargeStarted)
    assert (charge.state, charge.amount) == (models.ChargeState.CHARGING, 2 * 4500)

    read = _of("api.buyer", "get_hold")
    deadline = time.monotonic() + 15
    while (hold := read.sync(event_id, held.hold_id, client=buyer)).state != "CONFIRMED":
        assert time.monotonic() < deadline, f"not CONFIRMED in 15 s: {hold.state}"
        time.sleep(0.1)
    assert hold.state == models.HoldViewState.CONFIRMED and hold.winner == charge.charge_id
    order = hold.order
    assert isinstance(order, models.Order)
    assert (order.seat_ids, order.amount, order.charge_id) == (["s0", "s1"], 9000, charge.charge_id)
    assert [c.state for c in hold.charges] == [models.ChargeState.CAPTURED]

    refused = claim.sync_detailed(
        event_id, client=buyer, body=models.ClaimRequest(seat_id="s9"), idempotency_key="typed-2"
    )
    assert refused.status_code == 404 and isinstance(refused.parsed, models.Error)
    assert refused.parsed.error.code == models.ErrorErrorCode.UNKNOWN_SEAT
