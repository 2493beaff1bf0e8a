-- 0017_event_locale: the locale an event's prices and dates are written in (ADR 0046), a
-- BCP 47 tag such as de-DE, copied with its details. '': not given (the page's language).

alter table event_configs add column locale text not null default '';
