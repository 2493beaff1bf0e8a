"""The component schemas of every answer declared as a type (api/contract/holds.py,
catalogue.py, service.py, admin.py, listings.py), derived once for the OpenAPI document
(api/openapi.py)."""

from api.contract import admin, catalogue, holds, listings, service
from api.contract.atoms import STATE_SCHEMAS
from api.contract.derive import components

SCHEMAS = components(
    {
        **holds.EXAMPLES,
        **catalogue.EXAMPLES,
        **service.EXAMPLES,
        **admin.EXAMPLES,
        **listings.EXAMPLES,
    },
    closed=(holds.PaymentForm,),
    named=(*STATE_SCHEMAS, "EventKind"),  # named once, in the document
)
