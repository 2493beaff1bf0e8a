--[[ charge_outcome: apply a provider outcome (confirm-if-charge-wins), process-once per provider event.
KEYS[1..14] the event key set (engine/keys.py EVENT_KEYS, documented in _lib.lua)
ARGV[1] provider_event_id   ARGV[2] charge_id (our idempotency key from the provider metadata)
ARGV[3] attempt_id (unique)   ARGV[4] intent_id (join key)   ARGV[5] CAPTURED|DECLINED|FAILED
Returns {code, ...}: code charge_id charge_state hold_id hold_state first_seen(1|0), code one of
  CONFIRMED | REFUND | DECLINED | FAILED | CONTRADICTION | NOT_FOUND | RETRY_LATER
Invariants: a capture confirms a hold only if the charge is not resolve-by-refund and the hold is
RESERVED and live or QUARANTINED, with no winner yet and not given up by its owner; every other capture goes REFUNDING (never
a resurrected hold); a decline frees a quarantined or blocked seat; a provider event id already
seen returns its recorded reply and changes nothing; an attempt id maps to one charge forever. ]]
local event_id, charge_id, attempt, intent, outcome = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if event_id == '' or attempt == '' then return redis.error_reply('BAD_ARGS event and attempt ids') end
if outcome ~= CAPTURED and outcome ~= DECLINED and outcome ~= FAILED then
  return redis.error_reply('BAD_ARGS outcome ' .. tostring(outcome))
end
local ctx = context()
if not ctx then return { 'NOT_FOUND', charge_id, '', '', '', 1 } end
-- An event being rebuilt from the ledger is a DRAFT: its charges are not all back yet, so a
-- callback now could mistake a winner for an unknown charge. Nothing is recorded; the provider
-- retries (the API answers 503).
if ctx.cfg.status ~= 'open' then return { 'RETRY_LATER', charge_id, '', '', '', 1 } end

local recorded = redis.call('HGET', K_CALLBACKS, event_id)
if recorded then
  local r = cjson.decode(recorded)
  r[6] = 0
  return r
end

-- Find the charge: by attempt id (unique), else bind this attempt to our charge id, else it is a
-- new attempt on an already-bound charge (a child sharing its hold), else an unknown charge.
local c = nil
local by_attempt = redis.call('HGET', K_ATTEMPTS, attempt)
if by_attempt then
  c = get_charge(by_attempt)
else
  local parent = charge_id ~= '' and get_charge(charge_id) or nil
  if parent and parent.attempt == '' then
    c = parent
  elseif parent then
    c = { id = parent.id .. '/' .. attempt, hold = parent.hold, seat = parent.seat,
      login = parent.login, state = CHARGING, refund_only = parent.refund_only,
      amount = parent.amount, created_ms = ctx.now, decided_ms = 0, refund_attempts = 0,
      reason = 'new_attempt_on_charge' }
    local ph = get_hold(parent.hold)
    if ph then
      ph.charges = ph.charges .. ',' .. c.id
      put_hold(ph)
    end
  else
    -- Money we cannot tie to any hold of ours: it can only be refunded.
    c = { id = charge_id ~= '' and charge_id or ('orphan/' .. attempt), hold = '', seat = '',
      login = '', state = CHARGING, refund_only = 1, amount = 0, created_ms = ctx.now,
      decided_ms = 0, refund_attempts = 0, reason = 'unknown_charge' }
  end
  c.attempt = attempt
  c.intent = intent
  redis.call('HSET', K_ATTEMPTS, attempt, c.id)
  put_charge(c)
end

local h = nil
if c.hold ~= '' then
  h = get_hold(c.hold)
  if h then settle(ctx, h) end
end

local code
if c.state == CHARGING then
  c.decided_ms = ctx.now
  if outcome == CAPTURED then
    local live = h and (h.state == RESERVED or h.state == QUARANTINED)
    if c.refund_only == 0 and live and h.winner == '' and (h.given_up or 0) == 0 then
      local via = h.state == QUARANTINED and 'captured_in_quarantine' or 'captured'
      seat_move(h, 'S')  -- first: it is the step that can fail, and nothing is written before it
      c.state = CAPTURED
      put_charge(c)
      if h.charge == c.id then h.charge = '' end
      h.winner = c.id
      hold_end(ctx, h, CONFIRMED, via)
      emit(ctx, 'charge', c.id, CHARGING, CAPTURED, 1, h, c, 'winner')
      code = 'CONFIRMED'
    else
      local why = 'hold_not_live'
      if c.refund_only == 1 then why = (c.reason ~= '' and c.reason or 'resolve_by_refund')
      elseif not h then why = 'no_hold'
      elseif h.winner ~= '' then why = 'hold_has_winner'
      elseif (h.given_up or 0) == 1 then why = 'released_by_owner' end
      c.state = REFUNDING
      c.reason = why
      put_charge(c)
      redis.call('ZADD', K_REFUNDS, ctx.now, c.id)
      emit(ctx, 'charge', c.id, CHARGING, REFUNDING, 0, h, c, why)
      if h then charge_resolved(ctx, h, c, 'charge_refunded') end
      code = 'REFUND'
    end
  else
    c.state = outcome
    put_charge(c)
    emit(ctx, 'charge', c.id, CHARGING, outcome, 1, h, c, 'provider_' .. string.lower(outcome))
    if h then charge_resolved(ctx, h, c, 'charge_' .. string.lower(outcome)) end
    code = outcome
  end
elseif outcome == CAPTURED and (c.state == CAPTURED or c.state == REFUNDING) then
  code = c.state == CAPTURED and 'CONFIRMED' or 'REFUND'
elseif outcome == CAPTURED and c.state == REFUNDED then
  -- REFUNDED is a sink: a late or replayed capture only re-requests the idempotent refund.
  redis.call('ZADD', K_REFUNDS, ctx.now, c.id)
  emit(ctx, 'charge', c.id, REFUNDED, 'REREFUND', 0, h, c, 'capture_after_refund', event_id)
  code = 'REFUND'
elseif outcome == c.state then
  code = outcome
else
  -- The provider contradicts its own final word on this attempt. Nothing changes here; the
  -- alert goes to the operators and reconciliation against the provider ledger settles money.
  emit(ctx, 'alert', c.id, c.state, 'CONTRADICTION', 0, h, c, 'provider_said_' .. outcome, event_id)
  code = 'CONTRADICTION'
end

local reply = { code, c.id, c.state, c.hold, h and h.state or '', 1 }
redis.call('HSET', K_CALLBACKS, event_id, cjson.encode(reply))
return reply
