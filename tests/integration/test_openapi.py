"""The OpenAPI document is served, names exactly the routes the app serves, and schemathesis
fuzzing of every operation against the running API finds no 5xx and no undeclared status."""

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    status_code_conformance,
)

from api.app import ROUTES
from api.openapi import OPENAPI
from tests.integration.conftest import Stack

pytestmark = [pytest.mark.redis, pytest.mark.slow]

schema = schemathesis.openapi.from_dict(OPENAPI)


def test_spec_names_exactly_the_served_routes() -> None:
    served = {(r.path, m.lower()) for r in ROUTES for m in (r.methods or ()) if m != "HEAD"}
    documented = {(p, m) for p, ops in OPENAPI["paths"].items() for m in ops}
    assert served == documented


def test_spec_is_served(stack: Stack) -> None:
    with stack.client() as c:
        assert c.get("/openapi.json").status_code == 401  # ops only
        assert c.get("/openapi.json", headers=stack.admin_headers()).json() == OPENAPI


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_5xx_anywhere(case: schemathesis.Case, stack: Stack) -> None:
    response = case.call(base_url=stack.api, headers=stack.login("fuzz"), timeout=10)
    case.validate_response(
        response, checks=[not_a_server_error, status_code_conformance, content_type_conformance]
    )
