"""What people recognise an event by (ADR 0041), pure: its name, venue, description, image,
when the show starts in which time zone, and the locale its prices and dates are written in
(ADR 0046). Display data, no script's input: kept in the event hash beside `price_minor`, set
while the event is a DRAFT (engine/store/event_catalogue.py), then fixed: the ledger copies it
with the event's configuration when the event opens, and a rebuild writes it back."""

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

DETAIL_FIELDS = (
    "name", "venue", "description", "image_url", "starts_at_ms", "time_zone", "locale",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class EventDetails:
    name: str = ""
    venue: str = ""
    description: str = ""
    image_url: str = ""
    starts_at_ms: int = 0  # 0: not given
    time_zone: str = ""  # an IANA name (Europe/Berlin): the show's local time
    locale: str = ""  # a BCP 47 tag (de-DE): how its prices and dates are written (ADR 0046)

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> "EventDetails":
        """From an event hash (or a ledger row): absent fields read empty."""
        return cls(
            **{name: str(raw.get(name) or "") for name in DETAIL_FIELDS[:4]},
            starts_at_ms=int(raw.get("starts_at_ms") or 0),
            time_zone=str(raw.get("time_zone") or ""),
            locale=str(raw.get("locale") or ""),
        )

    def view(self) -> dict[str, Any]:
        """As every event read answers it: a detail not given is null."""
        return {name: value or None for name, value in asdict(self).items()}

    def changed(self, changes: Mapping[str, Any]) -> "EventDetails":
        return EventDetails.of({**asdict(self), **changes})
