-- 0006_policy_versions_and_shadow: every decision records the deadline policy enforced and its
-- version, and, while a candidate runs in shadow, the candidate, its version and, at a deadline
-- decision, the `to` it would have written instead (ADR 0020). Rows written before this
-- migration were all made under their event's first policy (none could change): version 1, no
-- shadow. A change of an event's policies is a decision of its own kind, `policy`.

alter table decisions add column policy_version bigint not null default 1
  check (policy_version >= 1);
alter table decisions add column shadow_policy text not null default '';
alter table decisions add column shadow_version bigint not null default 0
  check (shadow_version >= 0);
alter table decisions add column shadow_outcome text not null default '';

alter table decisions drop constraint decisions_kind_check;
alter table decisions add constraint decisions_kind_check
  check (kind in ('hold', 'charge', 'alert', 'policy'));

-- The report reads the decisions a shadow classified, per event.
create index decisions_shadowed on decisions (event_id, stream_ms, stream_seq)
  where shadow_outcome <> '';
