-- 0007_stock: quantity stock (ADR 0022). An event has a kind (`seats` or `stock`); a stock event
-- lists its locations in preference order and its SKUs with their prices, and either kind may
-- set its own per-login cap (null: the deployment's) and party size (0: the API's limit). Every
-- applied correction of a location's on-hand count, each initial count included, is a decision
-- of kind `correction`, kept whole in stock_corrections: the origin of every unit, so a rebuild
-- restores each location's on hand and reconciliation checks Redis against it.

alter table event_configs add column kind text not null default 'seats'
  check (kind in ('seats', 'stock'));
alter table event_configs add column locations text not null default '';
alter table event_configs add column login_cap integer;
alter table event_configs add column max_party integer not null default 0
  check (max_party >= 0);

create table event_skus (
  event_id      text not null references events (event_id),
  sku           text not null,
  price_minor   bigint not null check (price_minor >= 0),
  primary key (event_id, sku)
);

create table stock_corrections (
  event_id       text not null references events (event_id),
  correction_id  text not null,
  sku            text not null,
  location       text not null,
  mode           text not null check (mode in ('set', 'adjust')),
  value          bigint not null,
  on_hand_before bigint not null check (on_hand_before >= 0),
  on_hand_after  bigint not null check (on_hand_after >= 0),
  reason         text not null,
  operator       text not null,
  decided_at_ms  bigint not null,
  stream_ms      bigint not null,
  stream_seq     bigint not null,
  seq            bigint not null default 0 check (seq >= 0),
  primary key (event_id, correction_id)
);
-- A location's on hand is the `on_hand_after` of its last correction by decision number.
create index stock_corrections_location on stock_corrections (event_id, sku, location, seq);

alter table decisions drop constraint decisions_kind_check;
alter table decisions add constraint decisions_kind_check
  check (kind in ('hold', 'charge', 'alert', 'policy', 'correction'));

-- A stock hold's seat_id is its line list ('<sku>@<location>*<qty>,...'; a seat id never
-- contains '*'): two carts may both buy 'CHAIN@east*1', so one sale per seat is a seat rule.
drop index holds_one_sale_per_seat;
create unique index holds_one_sale_per_seat on holds (event_id, seat_id)
  where state in ('CONFIRMED', 'EXCEPTION') and strpos(seat_id, '*') = 0;
