-- 0003_money_movements: money the provider moves after a capture (its own refunds, disputes),
-- what it actually captured, and each event's currency and reversal policy (ADR 0014).

alter table decisions add column captured bigint not null default 0 check (captured >= 0);

alter table charges add column captured bigint not null default 0 check (captured >= 0);

-- A hold whose money left after the sale (EXCEPTION) still holds its seat: still one per seat.
drop index holds_one_sale_per_seat;
create unique index holds_one_sale_per_seat on holds (event_id, seat_id)
  where state in ('CONFIRMED', 'EXCEPTION');

-- A refund we asked for, or one the provider made on its own (PROVIDER_REFUNDED).
alter table refunds add column initiated_by text not null default 'merchant'
  check (initiated_by in ('merchant', 'provider'));

alter table event_configs add column currency text not null default 'EUR'
  check (currency ~ '^[A-Z]{3}$');
alter table event_configs add column reversal_policy text not null default 'manual'
  check (reversal_policy in ('manual', 'revoke'));

-- An attempt belongs to one charge forever; an orphan record (money a message claimed, that we
-- could not tie to a charge) is not a claim of ownership: another event may own the attempt.
drop index charges_attempt;
create unique index charges_attempt on charges (attempt_id)
  where attempt_id <> '' and charge_id not like 'orphan/%';
