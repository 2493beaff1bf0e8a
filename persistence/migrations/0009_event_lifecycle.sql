-- 0009_event_lifecycle: an operator closing or cancelling a sale is a decision of its own kind,
-- `event` (lua/event_close.lua, lua/event_cancel.lua, ADR 0025).

alter table decisions drop constraint decisions_kind_check;
alter table decisions add constraint decisions_kind_check
  check (kind in ('hold', 'charge', 'alert', 'policy', 'correction', 'event'));
