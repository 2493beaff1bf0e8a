-- 0001_ledger: the durable ledger mirrored from each event's Redis outbox.
-- decisions is the append-only audit (one row per outbox record, idempotent by decision_id);
-- holds and charges are the latest state per entity, applied in stream order.

create table events (
  event_id      text primary key,
  first_seen_at timestamptz not null default now()
);

create table decisions (
  event_id      text not null references events (event_id),
  decision_id   text not null,
  stream_ms     bigint not null,
  stream_seq    bigint not null,
  kind          text not null check (kind in ('hold', 'charge', 'alert')),
  entity_id     text not null,
  from_state    text not null,
  to_state      text not null,
  terminal      boolean not null,
  hold_id       text not null,
  charge_id     text not null,
  seat_id       text not null,
  login         text not null,
  winner        text not null,
  amount        bigint not null check (amount >= 0),
  attempt_id    text not null,
  intent_id     text not null,
  policy        text not null,
  reason        text not null,
  decided_at_ms bigint not null,
  recorded_at   timestamptz not null default now(),
  primary key (event_id, decision_id),
  unique (event_id, stream_ms, stream_seq)
);
-- Exactly one terminal decision per hold and per charge, enforced here, not only in code.
create unique index decisions_one_terminal on decisions (event_id, kind, entity_id) where terminal;

create table holds (
  event_id      text not null references events (event_id),
  hold_id       text not null,
  seat_id       text not null,
  login         text not null,
  state         text not null,
  winner        text not null,
  policy        text not null,
  decided_at_ms bigint not null,
  stream_ms     bigint not null,
  stream_seq    bigint not null,
  primary key (event_id, hold_id)
);
-- A seat is sold to at most one hold.
create unique index holds_one_sale_per_seat on holds (event_id, seat_id) where state = 'CONFIRMED';

create table charges (
  event_id      text not null references events (event_id),
  charge_id     text not null,
  hold_id       text not null,
  seat_id       text not null,
  state         text not null,
  amount        bigint not null check (amount >= 0),
  attempt_id    text not null,
  intent_id     text not null,
  policy        text not null,
  decided_at_ms bigint not null,
  stream_ms     bigint not null,
  stream_seq    bigint not null,
  primary key (event_id, charge_id)
);
create unique index charges_attempt on charges (attempt_id) where attempt_id <> '';
create index charges_intent on charges (intent_id) where intent_id <> '';

create table refunds (
  event_id      text not null references events (event_id),
  charge_id     text not null,
  amount        bigint not null check (amount >= 0),
  refunded_at_ms bigint not null,
  primary key (event_id, charge_id)
);

create table raw_callbacks (
  provider_event_id text primary key,
  event_id      text not null,
  body          bytea not null,
  received_at   timestamptz not null default now()
);

create table stock_corrections (
  id            bigserial primary key,
  event_id      text not null references events (event_id),
  pool_id       text not null,
  delta         bigint not null,
  reason        text not null,
  actor         text not null,
  decided_at_ms bigint not null,
  policy        text not null default ''
);

-- Records the ledger refused (a constraint said no): surfaced, never silently dropped.
create table ledger_alerts (
  id            bigserial primary key,
  event_id      text not null,
  stream_id     text not null,
  decision_id   text not null,
  problem       text not null,
  record        jsonb not null,
  raised_at     timestamptz not null default now(),
  unique (event_id, stream_id)
);
