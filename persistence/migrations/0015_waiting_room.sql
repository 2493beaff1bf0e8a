-- 0015_waiting_room: an event's waiting room in the ledger (ADR 0029), so a rebuilt event sells
-- with its room and every place as it was. The room's settings and its secret (which drew the
-- places before T0 and signs the admissions) as last set; then every change of its line in
-- decision order: a place taken, an admission of the places after `place_from` up to `place`,
-- an admission spent on a hold.
create table waiting_rooms (
  event_id text primary key,
  admit_per_s integer not null,
  admit_factor_pct integer not null,
  admission_ttl_ms bigint not null,
  auto boolean not null,
  secret text not null,
  seq bigint not null
);

create table waiting_moves (
  event_id text not null,
  decision_id text not null,
  seq bigint not null,
  move text not null check (move in ('PLACE_TAKEN', 'ADMITTED', 'ADMISSION_SPENT')),
  login text not null default '',
  place bigint,
  place_from bigint,
  admissions integer not null default 0,
  hold_id text not null default '',
  at_ms bigint not null,
  primary key (event_id, decision_id)
);
create index waiting_moves_order on waiting_moves (event_id, seq);

-- A room's changes are decisions of the event like any other (numbered, fenced, ADR 0017).
alter table decisions drop constraint decisions_kind_check;
alter table decisions add constraint decisions_kind_check
  check (kind in ('hold', 'charge', 'alert', 'policy', 'correction', 'event', 'queue'));
