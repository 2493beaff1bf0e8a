-- 0002_event_config: what an event is, so that Redis can be rebuilt from the ledger.
-- Mirrored by the ledger writer from Redis the first time it sees an event.

create table event_configs (
  event_id      text primary key references events (event_id),
  hold_ttl_ms   bigint not null,
  quarantine_ms bigint not null,
  policy        text not null check (policy in ('quarantine', 'release_refund')),
  price_minor   bigint not null,
  opens_at_ms   bigint not null,
  seats_total   integer not null
);

create table seats (
  event_id      text not null references events (event_id),
  seat_id       text not null,
  rank          double precision not null,
  section       text not null,
  primary key (event_id, seat_id)
);
