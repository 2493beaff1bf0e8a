-- Every SQL statement of the ledger, named once (persistence/queries.py loads them; a test
-- prepares each one against a migrated database). A block starts with `-- name: <name>`.

-- name: insert_decision
insert into decisions (event_id, decision_id, stream_ms, stream_seq, kind, entity_id,
  from_state, to_state, terminal, hold_id, charge_id, seat_id, login, winner, amount,
  attempt_id, intent_id, policy, reason, decided_at_ms, captured, seq, policy_version,
  shadow_policy, shadow_version, shadow_outcome)
values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20,
  $21, $22, $23, $24, $25, $26)
on conflict (event_id, decision_id) do nothing

-- name: upsert_hold
-- Forward only, in stream order: a replayed older record never moves a hold back.
insert into holds as h (event_id, hold_id, seat_id, login, state, winner, policy,
  decided_at_ms, stream_ms, stream_seq)
values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
on conflict (event_id, hold_id) do update set
  state = excluded.state, winner = excluded.winner, decided_at_ms = excluded.decided_at_ms,
  seat_id = excluded.seat_id,
  stream_ms = excluded.stream_ms, stream_seq = excluded.stream_seq
where (h.stream_ms, h.stream_seq) < (excluded.stream_ms, excluded.stream_seq)

-- name: upsert_charge
insert into charges as c (event_id, charge_id, hold_id, seat_id, state, amount, attempt_id,
  intent_id, policy, decided_at_ms, stream_ms, stream_seq, captured, part_of)
values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
on conflict (event_id, charge_id) do update set
  state = excluded.state, attempt_id = excluded.attempt_id, intent_id = excluded.intent_id,
  captured = excluded.captured,
  decided_at_ms = excluded.decided_at_ms, stream_ms = excluded.stream_ms,
  stream_seq = excluded.stream_seq
where (c.stream_ms, c.stream_seq) < (excluded.stream_ms, excluded.stream_seq)

-- name: stage_decisions
-- The fast path's staging tables (persistence/ledger_apply.py): this session's own, emptied at
-- every commit; COPY fills them, the two statements below move them into the ledger.
create temp table if not exists staged_decisions (like decisions including defaults)
  on commit delete rows

-- name: stage_holds
create temp table if not exists staged_holds (like holds) on commit delete rows

-- name: insert_staged_decisions
-- insert_decision for a whole staged batch.
insert into decisions (event_id, decision_id, stream_ms, stream_seq, kind, entity_id,
  from_state, to_state, terminal, hold_id, charge_id, seat_id, login, winner, amount,
  attempt_id, intent_id, policy, reason, decided_at_ms, captured, seq, policy_version,
  shadow_policy, shadow_version, shadow_outcome)
select event_id, decision_id, stream_ms, stream_seq, kind, entity_id, from_state, to_state,
  terminal, hold_id, charge_id, seat_id, login, winner, amount, attempt_id, intent_id, policy,
  reason, decided_at_ms, captured, seq, policy_version, shadow_policy, shadow_version,
  shadow_outcome
from staged_decisions order by stream_ms, stream_seq
on conflict (event_id, decision_id) do nothing

-- name: upsert_staged_holds
-- upsert_hold for a staged batch: one row per hold (its latest), applied in stream order.
insert into holds as h (event_id, hold_id, seat_id, login, state, winner, policy,
  decided_at_ms, stream_ms, stream_seq)
select event_id, hold_id, seat_id, login, state, winner, policy, decided_at_ms, stream_ms,
  stream_seq
from staged_holds order by stream_ms, stream_seq
on conflict (event_id, hold_id) do update set
  state = excluded.state, winner = excluded.winner, decided_at_ms = excluded.decided_at_ms,
  seat_id = excluded.seat_id,
  stream_ms = excluded.stream_ms, stream_seq = excluded.stream_seq
where (h.stream_ms, h.stream_seq) < (excluded.stream_ms, excluded.stream_seq)

-- name: bulk_upsert_charges
-- upsert_charge for a batch: one row per charge (its latest), in the order of the arrays.
insert into charges as c (event_id, charge_id, hold_id, seat_id, state, amount, attempt_id,
  intent_id, policy, decided_at_ms, stream_ms, stream_seq, captured, part_of)
select event_id, charge_id, hold_id, seat_id, state, amount, attempt_id, intent_id, policy,
  decided_at_ms, stream_ms, stream_seq, captured, part_of
from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[],
  $7::text[], $8::text[], $9::text[], $10::bigint[], $11::bigint[], $12::bigint[],
  $13::bigint[], $14::text[]) with ordinality
  as t(event_id, charge_id, hold_id, seat_id, state, amount, attempt_id, intent_id, policy,
  decided_at_ms, stream_ms, stream_seq, captured, part_of, n)
order by n
on conflict (event_id, charge_id) do update set
  state = excluded.state, attempt_id = excluded.attempt_id, intent_id = excluded.intent_id,
  captured = excluded.captured,
  decided_at_ms = excluded.decided_at_ms, stream_ms = excluded.stream_ms,
  stream_seq = excluded.stream_seq
where (c.stream_ms, c.stream_seq) < (excluded.stream_ms, excluded.stream_seq)

-- name: insert_refund
insert into refunds (event_id, charge_id, amount, refunded_at_ms, initiated_by)
values ($1, $2, $3, $4, $5)
on conflict (event_id, charge_id) do nothing

-- name: insert_alert
insert into ledger_alerts (event_id, stream_id, decision_id, problem, record)
values ($1, $2, $3, $4, $5) on conflict (event_id, stream_id) do nothing

-- name: insert_raw_callback
-- The first delivery of a provider event is its evidence; duplicates add nothing.
insert into raw_callbacks (provider_event_id, event_id, body, received_at_ms)
values ($1, $2, $3, $4) on conflict (provider_event_id) do nothing

-- name: event_raw_callbacks
select provider_event_id, body, received_at_ms from raw_callbacks
where event_id = $1 order by received_at_ms, provider_event_id

-- name: insert_event
insert into events (event_id) values ($1) on conflict do nothing

-- name: event_mirrored
select 1 from event_configs where event_id = $1

-- name: insert_seat
insert into seats (event_id, seat_id, rank, section, price_minor) values ($1, $2, $3, $4, $5)
on conflict do nothing

-- name: insert_event_config
insert into event_configs (event_id, hold_ttl_ms, quarantine_ms, policy, price_minor,
  opens_at_ms, seats_total, currency, reversal_policy, kind, locations, login_cap, max_party,
  name, venue, description, image_url, starts_at_ms, time_zone, locale, redis_prefix)
values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,
  $20, $21)
on conflict do nothing

-- name: insert_event_sku
insert into event_skus (event_id, sku, price_minor) values ($1, $2, $3) on conflict do nothing

-- name: event_kind
select kind from event_configs where event_id = $1

-- name: event_skus
select sku, price_minor from event_skus where event_id = $1 order by sku

-- name: insert_stock_correction
-- One row per applied correction, idempotent by its id (a replayed record writes nothing).
insert into stock_corrections (event_id, correction_id, sku, location, mode, value,
  on_hand_before, on_hand_after, reason, operator, decided_at_ms, stream_ms, stream_seq, seq)
values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
on conflict (event_id, correction_id) do nothing

-- name: event_stock_corrections
-- An event's corrections in the order they were decided (a location's last one is its on hand).
select * from stock_corrections where event_id = $1 order by seq, stream_ms, stream_seq

-- name: event_stock_on_hand
-- Per SKU and location, what the ledger's corrections add up to (after - before, summed).
select sku, location, sum(on_hand_after - on_hand_before)::bigint as on_hand
from stock_corrections where event_id = $1 group by sku, location

-- name: event_config
select * from event_configs where event_id = $1

-- name: event_seats
select seat_id, rank, section, price_minor from seats where event_id = $1 order by rank

-- name: decisions_held
-- Which of these decision ids the ledger holds: one indexed query, however many the event has.
select decision_id from decisions where event_id = $1 and decision_id = any($2::text[])

-- name: event_final_charges
-- Charges whose one terminal record the ledger holds (later records are not terminal).
select entity_id from decisions where event_id = $1 and kind = 'charge' and terminal

-- name: claim_event_owner
-- An event mirrored before the ledger named owners ('') is claimed by the deployment whose
-- writer finds it in its Redis (ADR 0037); a named owner never changes.
update event_configs set redis_prefix = $2 where event_id = $1 and redis_prefix = ''

-- name: ledger_events
-- The events of this deployment (its Redis key prefix), and those mirrored before the ledger
-- named an owner (ADR 0037).
select event_id from event_configs where redis_prefix in ($1, '') order by event_id

-- name: event_lifecycle
-- The operator's last end of the sale (EVENT_CLOSED or EVENT_CANCELLED), null when none.
select to_state from decisions where event_id = $1 and kind = 'event'
order by seq desc limit 1

-- name: event_last_seq
-- The highest decision number of the event the ledger holds (a Redis behind it went back in time).
select coalesce(max(seq), 0) from decisions where event_id = $1

-- name: event_refused_decisions
-- Refused and not yet settled by a rebuild that replaced the Redis which made them.
select decision_id, problem from ledger_alerts where event_id = $1 and superseded_at_ms is null

-- name: event_superseded_decisions
select decision_id, problem from ledger_alerts
where event_id = $1 and superseded_at_ms is not null

-- name: supersede_refused_decisions
-- A rebuild from the ledger replaced the Redis that made these decisions: the ledger won.
update ledger_alerts set superseded_at_ms = $2
where event_id = $1 and decision_id = any($3::text[]) and superseded_at_ms is null

-- name: event_holds
select * from holds where event_id = $1

-- name: event_charges
select * from charges where event_id = $1

-- name: event_holds_paying
-- Holds the ledger knows only through their charges (a hold is recorded when it ends): the
-- buyer was paying when Redis lost the event. Each with its latest charge.
select distinct on (d.hold_id) d.hold_id, d.login, d.seat_id, d.charge_id, d.decided_at_ms
from decisions d
where d.event_id = $1 and d.kind = 'charge' and d.hold_id <> ''
  and not exists (select 1 from holds h where h.event_id = d.event_id and h.hold_id = d.hold_id)
order by d.hold_id, d.stream_ms desc, d.stream_seq desc

-- name: policy_decisions
-- An event's hold and charge decisions by the deadline policy enforced when each was made, and
-- how many of them a shadow candidate classified (ADR 0020).
select policy, policy_version, count(*) as decisions,
  count(*) filter (where terminal) as terminal,
  count(*) filter (where shadow_outcome <> '') as classified
from decisions
where event_id = $1 and kind in ('hold', 'charge')
group by policy, policy_version
order by policy_version, policy

-- name: policy_shadow_counts
-- Each candidate's classifications: the real decision (kind, to) against the candidate's.
select shadow_policy, shadow_version, kind, to_state, shadow_outcome, count(*) as n
from decisions
where event_id = $1 and shadow_outcome <> ''
group by shadow_policy, shadow_version, kind, to_state, shadow_outcome
order by shadow_version, kind, to_state, shadow_outcome

-- name: policy_shadow_examples
-- The first $2 disagreements of each kind, for a person to read.
select shadow_policy, shadow_version, kind, to_state, shadow_outcome, decision_id, hold_id,
  charge_id, from_state, reason, policy, policy_version, decided_at_ms
from (
  select d.*, row_number() over (
    partition by shadow_policy, shadow_version, kind, to_state, shadow_outcome
    order by stream_ms, stream_seq) as nth
  from decisions d
  where event_id = $1 and shadow_outcome <> '' and shadow_outcome <> to_state
) disagreeing
where nth <= $2
order by shadow_version, kind, to_state, shadow_outcome, nth

-- name: policy_changes
-- An event's policy changes in order (id: the version each took); a rebuild restores the
-- policies they left.
select entity_id, from_state, to_state, policy, policy_version, shadow_policy, shadow_version,
  reason, decided_at_ms
from decisions
where event_id = $1 and kind = 'policy'
order by stream_ms, stream_seq

-- name: webhook_fan_out_context
-- Before a batch's notifications are fanned out: the event's currency (an order's amount names
-- it), and whether any endpoint could receive anything at all (none: nothing to write).
select (select currency from event_configs where event_id = $1) as currency,
  exists (select 1 from webhook_endpoints where enabled and deleted_at is null) as any_endpoint

-- name: insert_webhook_deliveries
-- One delivery per live endpoint subscribed to the notification's type, in the transaction
-- that mirrors its decision (ADR 0024); a replayed batch writes nothing twice. $6: the charge
-- whose win the notification needs ('' : none), read from the decisions the ledger holds.
insert into webhook_deliveries (endpoint_id, event_id, decision_id, message_id, event_type, body)
select e.endpoint_id, $1, $2, $3, $4, $5
from webhook_endpoints e
where e.enabled and e.deleted_at is null and $4 = any (e.event_types)
  and ($6 = '' or exists (
    select 1 from decisions d
    where d.event_id = $1 and d.kind = 'charge' and d.entity_id = $6
      and d.to_state = 'CAPTURED' and d.terminal))
on conflict (endpoint_id, event_id, decision_id) do nothing

-- name: claim_webhook_deliveries
-- At most $1 due deliveries of live endpoints, each leased for $2 ms (its attempt counted): a
-- sender that dies mid-attempt leaves it due again when the lease passes; two senders never
-- claim the same delivery (SKIP LOCKED). $3: the secret a rotation replaced signs beside the
-- new one while it is still valid.
with due as (
  select d.delivery_id from webhook_deliveries d
  join webhook_endpoints e on e.endpoint_id = d.endpoint_id
  where d.status = 'pending' and d.next_attempt_at <= now()
    and e.enabled and e.deleted_at is null
  order by d.next_attempt_at
  limit $1
  for update of d skip locked
)
update webhook_deliveries d set attempts = d.attempts + 1, last_attempt_at = now(),
  next_attempt_at = now() + $2 * interval '1 millisecond'
from due, webhook_endpoints e
where d.delivery_id = due.delivery_id and e.endpoint_id = d.endpoint_id
returning d.delivery_id, d.endpoint_id, d.message_id, d.body, d.attempts, e.url, e.secret,
  case when e.previous_until > now() then e.previous_secret else '' end as previous_secret,
  extract(epoch from (now() - d.window_from)) * 1000 as age_ms

-- name: webhook_delivered
update webhook_deliveries set status = 'delivered', delivered_at = now(), last_status = $2,
  last_error = ''
where delivery_id = $1

-- name: webhook_not_delivered
-- The next attempt $4 ms from now, or failed (still replayable) when that would be past the
-- maximum age ($5 ms from its creation or last replay). A delivery another attempt delivered
-- meanwhile stays delivered.
update webhook_deliveries set last_status = $2, last_error = $3,
  next_attempt_at = now() + $4 * interval '1 millisecond',
  status = case when now() + $4 * interval '1 millisecond'
    > window_from + $5 * interval '1 millisecond' then 'failed' else 'pending' end
where delivery_id = $1 and status = 'pending'

-- name: prune_webhook_deliveries
-- The delivery log keeps a delivery that is done (delivered, or failed and not replayed) for $1
-- ms after its last attempt; older ones go, at most $2 per call. A decision replayed by the
-- writer after its delivery was pruned is delivered again: receivers deduplicate by its
-- webhook-id, which stays the same (ADR 0024).
with old as (
  select delivery_id from webhook_deliveries
  where status in ('delivered', 'failed')
    and coalesce(delivered_at, last_attempt_at, created_at) < now() - $1 * interval '1 millisecond'
  limit $2
)
delete from webhook_deliveries d using old where d.delivery_id = old.delivery_id

-- name: webhook_endpoint_gone
-- The endpoint answered 410 Gone: it wants nothing more (Standard Webhooks); an operator may
-- enable it again.
update webhook_endpoints set enabled = false, disabled_reason = 'gone', updated_at = now()
where endpoint_id = $1 and enabled

-- name: webhook_delivery_figures
-- Per live endpoint: its deliveries in the log by status, the attempts they took, and the age
-- of its oldest pending one (0: none pending). Read by `onsale ledger` for its metrics.
select e.endpoint_id, e.enabled,
  count(d.delivery_id) filter (where d.status = 'pending') as pending,
  count(d.delivery_id) filter (where d.status = 'delivered') as delivered,
  count(d.delivery_id) filter (where d.status = 'failed') as failed,
  coalesce(sum(d.attempts), 0)::bigint as attempts,
  coalesce(extract(epoch from now() - min(d.created_at) filter (where d.status = 'pending')),
    0)::float8 as oldest_pending_s
from webhook_endpoints e left join webhook_deliveries d on d.endpoint_id = e.endpoint_id
where e.deleted_at is null
group by e.endpoint_id, e.enabled
order by e.endpoint_id

-- name: upsert_waiting_room
-- A room's settings and secret as last set (a replayed or older setup changes nothing).
insert into waiting_rooms (event_id, admit_per_s, admit_factor_pct, admission_ttl_ms, auto,
  secret, seq)
values ($1, $2, $3, $4, $5, $6, $7)
on conflict (event_id) do update set admit_per_s = excluded.admit_per_s,
  admit_factor_pct = excluded.admit_factor_pct, admission_ttl_ms = excluded.admission_ttl_ms,
  auto = excluded.auto, secret = excluded.secret, seq = excluded.seq
where waiting_rooms.seq < excluded.seq

-- name: insert_waiting_move
-- One change of a room's line, idempotent by its decision id.
insert into waiting_moves (event_id, decision_id, seq, move, login, place, place_from,
  admissions, hold_id, at_ms)
values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
on conflict (event_id, decision_id) do nothing

-- name: event_waiting_room
select * from waiting_rooms where event_id = $1

-- name: event_waiting_moves
-- A room's line changes in the order they were decided.
select * from waiting_moves where event_id = $1 order by seq

-- name: insert_presale_code
-- A presale's code as its batch added it (ADR 0049), idempotent (a code is never redefined).
insert into presale_codes (event_id, code, presale, opens_at_ms, closes_at_ms, uses, per_login,
  expires_ms, decision_id)
values ($1, $2, $3, $4, $5, $6, $7, $8, $9)
on conflict (event_id, code) do nothing

-- name: insert_code_use
-- A hold that ended having spent a code, and how it ended, idempotent by the hold.
insert into presale_code_uses (event_id, hold_id, code, login, to_state, decided_at_ms)
values ($1, $2, $3, $4, $5, $6)
on conflict (event_id, hold_id) do nothing

-- name: event_presale_codes
select * from presale_codes where event_id = $1 order by code

-- name: event_code_sales
-- Each code's uses by the sales the ledger holds, by login (a sale keeps its use).
select code, login, count(*) as sales from presale_code_uses
where event_id = $1 and to_state = 'CONFIRMED'
group by code, login
