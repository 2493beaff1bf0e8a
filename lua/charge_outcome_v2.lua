--[[ charge_outcome_v2: verify a provider outcome against our charge, then apply it (confirm-if-charge-wins), once per provider event.
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[1] provider_event_id   ARGV[2] provider idempotency key (our charge id, as the provider echoes it)
ARGV[3] attempt_id (unique)   ARGV[4] intent_id (join key)   ARGV[5] CAPTURED|DECLINED|FAILED (the message type)
ARGV[6] status field of the message   ARGV[7] amount (minor units; 'invalid' when not an integer)
ARGV[8] currency   ARGV[9] metadata event id   ARGV[10] metadata hold id   ARGV[11] metadata charge id
Returns {code, ...}: code charge_id charge_state hold_id hold_state first_seen(1|0) problems, code one of
  CONFIRMED | REFUND | DECLINED | FAILED | CONTRADICTION | MISMATCH | STALE | NOT_FOUND | RETRY_LATER
Invariants: nothing the message says is applied before it matches the charge we created (event,
hold, charge key, attempt/intent binding, amount, currency, and a status that agrees with the
type); a message whose identity does not match moves no seat and no money (MISMATCH, an alert);
a capture confirms a hold only if the charge is not resolve-by-refund and the hold is RESERVED
and live or QUARANTINED, with no winner yet and not given up by its owner; every other capture
of our money, a capture of the wrong amount, and a capture contradicting an earlier decline or
failure go REFUNDING (never a resurrected hold); captured money we cannot tie to any charge goes
REFUNDING as an orphan whose refund the refund worker first checks with the provider; a provider
event id already seen returns its recorded reply and changes nothing; an attempt id maps to one
charge forever; a capture past its hold's deadline is recorded with what the shadow deadline
policy, if one runs, would have decided (it acts on nothing, ADR 0020); a refund or dispute
noted before this capture applies right after it, as if delivered in order (ADR 0036); a capture
for another amount than asked, 0 included, closes its attempt down the refund path. ]]
local pev, key, attempt, intent, outcome = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local status, amount_raw, currency = ARGV[6], ARGV[7], ARGV[8]
local m_event, m_hold, m_charge = ARGV[9], ARGV[10], ARGV[11]
if pev == '' or attempt == '' then return redis.error_reply('BAD_ARGS event and attempt ids') end
local STATUS_OF = { CAPTURED = 'captured', DECLINED = 'declined', FAILED = 'failed' }
if not STATUS_OF[outcome] then return redis.error_reply('BAD_ARGS outcome ' .. tostring(outcome)) end
local ctx = context()
if not ctx then return { 'NOT_FOUND', key, '', '', '', 1, '' } end
-- An event being rebuilt from the ledger is a DRAFT: its charges are not all back yet, so a
-- callback now could mistake a winner for an unknown charge. Nothing is recorded; the provider
-- retries (the API answers 503).
if not deciding(ctx.cfg) then return { 'RETRY_LATER', key, '', '', '', 1, '' } end

local recorded = recorded_reply(pev)
if recorded then return recorded end

local amount = tonumber(amount_raw)
if amount and (amount < 0 or amount ~= math.floor(amount)) then amount = nil end
local claimed = { provider_event = pev, key = key, attempt = attempt, intent = intent,
  outcome = outcome, status = status, amount = amount_raw, currency = currency,
  meta_event = m_event, meta_hold = m_hold, meta_charge = m_charge }

local function finish(code, c, h, problems)
  local reply = { code, c and c.id or key, c and c.state or '', c and c.hold or '',
    h and h.state or '', 1, problems or '' }
  redis.call('HSET', K_CALLBACKS, pev, cjson.encode(reply))
  return reply
end

-- Problems of the message itself, before any charge is looked at: a status that disagrees with
-- the type, or an amount that is no amount of money (missing, not an integer, negative).
local problems = {}
if status ~= STATUS_OF[outcome] then problems[#problems + 1] = 'status' end
if not amount then problems[#problems + 1] = 'amount' end
local coherent = #problems == 0
if m_event ~= ctx.cfg.id then problems[#problems + 1] = 'event' end
if m_charge ~= '' and m_charge ~= key then problems[#problems + 1] = 'charge' end

-- Find the charge: by attempt id (bound already), else the charge whose key the message names
-- (not bound yet: bind it, or, if it is bound to another attempt, a new attempt on it).
local c, parent = nil, nil
local by_attempt = redis.call('HGET', K_ATTEMPTS, attempt)
if by_attempt then
  c = get_charge(by_attempt)
elseif key ~= '' then
  parent = get_charge(key)
end
local target = c or parent

if not target then
  -- Money we cannot tie to any charge of this event. A capture can only be given back, but the
  -- refund worker first asks the provider whose money it is (never a winner's elsewhere).
  local alert_reason = 'unknown_charge'
  if #problems > 0 then alert_reason = alert_reason .. ':' .. table.concat(problems, ',') end
  if outcome == CAPTURED and coherent then
    local o = { id = 'orphan/' .. attempt, key = key, hold = '', seat = '', login = '',
      state = REFUNDING, refund_only = 1, amount = 0, captured = amount or 0, attempt = attempt,
      intent = intent, created_ms = ctx.now, decided_ms = ctx.now, refund_attempts = 0,
      reason = alert_reason, final = 0 }
    redis.call('HSET', K_ATTEMPTS, attempt, o.id)
    refund_due(ctx.now, o.id)
    charge_record(ctx, o, '', nil, alert_reason)
    raise_alert(ctx, 'pev/' .. pev, nil, o, alert_reason, claimed)
    return finish('REFUND', o, nil, table.concat(problems, ','))
  end
  raise_alert(ctx, 'pev/' .. pev, nil, nil, alert_reason, claimed)
  return finish('MISMATCH', nil, nil, table.concat(problems, ','))
end

-- Identity: the message must name the charge, hold and intent we created for this attempt.
if key ~= (target.key or target.id) then problems[#problems + 1] = 'charge' end
-- (a message that names no hold is checked by its key alone: the key is minted per hold)
if target.hold ~= '' and m_hold ~= '' and m_hold ~= target.hold then
  problems[#problems + 1] = 'hold'
end
if c and c.intent ~= '' and intent ~= '' and intent ~= c.intent then
  problems[#problems + 1] = 'intent'
end
local h = nil
if target.hold ~= '' then h = get_hold(target.hold) end
if #problems > 0 then
  -- Not bound, nothing moved: an alert for ops. The provider's own record (status query) is
  -- what reconciliation trusts to settle this attempt.
  raise_alert(ctx, 'pev/' .. pev, h, target, 'mismatch:' .. table.concat(problems, ','), claimed)
  return finish('MISMATCH', target, h, table.concat(problems, ','))
end

-- The message is about our charge: bind the attempt (a new attempt on a bound charge is a child
-- charge sharing its hold, key and amount).
if not c then
  if parent.attempt == '' then
    c = parent
  else
    c = { id = parent.id .. '/' .. attempt, key = parent.key or parent.id, hold = parent.hold,
      seat = parent.seat, login = parent.login, state = CHARGING,
      refund_only = parent.refund_only, amount = parent.amount, captured = 0,
      created_ms = ctx.now, decided_ms = 0, refund_attempts = 0,
      reason = 'new_attempt_on_charge', final = 0 }
    if h then
      h.charges = h.charges .. ',' .. c.id
      put_hold(h)
    end
  end
  c.attempt = attempt
  c.intent = intent
  redis.call('HSET', K_ATTEMPTS, attempt, c.id)
  put_charge(c)
end
if h then settle(ctx, h) end

-- Money: a coherent message about our charge, for another amount or currency than we asked: if
-- it captured, that money is real and cannot win (for an orphan: what it captured before).
local money = {}
local expected = c.amount
if string.sub(c.id, 1, 7) == 'orphan/' then expected = c.captured end
if amount ~= expected then money[#money + 1] = 'amount' end
if currency ~= ctx.cfg.currency then money[#money + 1] = 'currency' end

local code
if #money > 0 then
  local why = 'mismatch:' .. table.concat(money, ',')
  raise_alert(ctx, 'pev/' .. pev, h, c, why, claimed)
  local open = c.state == CHARGING or c.state == DECLINED or c.state == FAILED
  if outcome == CAPTURED and open then
    -- Captured, but not what we sold (before or after the provider's own decline; 0 included:
    -- the provider says the attempt is captured): it can never win, so the attempt is closed;
    -- whatever it took goes back, and the hold stops waiting for it and may pay again.
    local from = c.state
    charge_move(c, REFUNDING)
    c.captured = amount
    c.decided_ms = ctx.now
    c.reason = why
    refund_due(ctx.now, c.id)
    charge_record(ctx, c, from, h, why)
    if h and from == CHARGING then charge_resolved(ctx, h, c, 'charge_refunded') end
    moves_due(ctx, c, h)
    code = 'REFUND'
  else
    code = 'MISMATCH'
  end
  return finish(code, c, h, table.concat(money, ','))
end

if c.state == CHARGING then
  c.decided_ms = ctx.now
  if outcome == CAPTURED then
    c.captured = amount
    -- A late capture: the shadow candidate's view of it, taken before this decision moves
    -- anything and written beside it in the charge's record (ADR 0020).
    local shadow = shadow_capture(ctx, h, c)
    local live = h and (h.state == RESERVED or h.state == QUARANTINED)
    if c.refund_only == 0 and live and h.winner == '' and (h.given_up or 0) == 0 then
      local via = h.state == QUARANTINED and 'captured_in_quarantine' or 'captured'
      seat_move(h, 'S')  -- first: it is the step that can fail, and nothing is written before it
      charge_move(c, CAPTURED)
      put_charge(c)
      if h.charge == c.id then h.charge = '' end
      h.winner = c.id
      hold_end(ctx, h, CONFIRMED, via)
      -- The sale is durable once the ledger holds its last record: the API tells the buyer
      -- CONFIRMED (and the provider 200) only then (ADR 0016).
      ctx.shadow_outcome = shadow
      h.record = charge_record(ctx, c, CHARGING, h, 'winner')
      put_hold(h)
      code = 'CONFIRMED'
    else
      local why = 'hold_not_live'
      if c.refund_only == 1 then why = (c.reason ~= '' and c.reason or 'resolve_by_refund')
      elseif not h then why = 'no_hold'
      elseif h.winner ~= '' then why = 'hold_has_winner'
      elseif (h.given_up or 0) == 1 then why = 'released_by_owner' end
      charge_move(c, REFUNDING)
      c.reason = why
      refund_due(ctx.now, c.id)
      ctx.shadow_outcome = shadow
      charge_record(ctx, c, CHARGING, h, why)
      if h then charge_resolved(ctx, h, c, 'charge_refunded') end
      code = 'REFUND'
    end
  else
    charge_move(c, outcome)
    charge_record(ctx, c, CHARGING, h, 'provider_' .. string.lower(outcome))
    if h then charge_resolved(ctx, h, c, 'charge_' .. string.lower(outcome)) end
    code = outcome
  end
  -- Money the provider moved before this capture reached us (a refund, a dispute) applies now,
  -- as if delivered in order (lua/_money.lua, ADR 0036).
  if outcome == CAPTURED then moves_due(ctx, c, h) end
elseif outcome == CAPTURED and (c.state == CAPTURED or c.state == REFUNDING) then
  code = c.state == CAPTURED and 'CONFIRMED' or 'REFUND'
elseif outcome == CAPTURED and c.state == REFUNDED then
  -- REFUNDED is a sink: a late or replayed capture only re-requests the idempotent refund.
  refund_due(ctx.now, c.id)
  emit(ctx, 'charge', c.id, REFUNDED, 'REREFUND', 0, h, c, 'capture_after_refund', pev)
  code = 'REFUND'
elseif outcome == CAPTURED and (c.state == DECLINED or c.state == FAILED) then
  -- The provider captured after telling us it declined (or failed) this very attempt: money
  -- to give back, never a seat; the hold stopped waiting for this charge when it was declined.
  local from = c.state
  local why = 'capture_after_' .. string.lower(from)
  charge_move(c, REFUNDING)
  c.decided_ms = ctx.now
  c.captured = amount
  c.reason = why
  refund_due(ctx.now, c.id)
  charge_record(ctx, c, from, h, why)
  raise_alert(ctx, 'pev/' .. pev, h, c, why, claimed)
  moves_due(ctx, c, h)
  code = 'REFUND'
elseif outcome == CAPTURED then
  -- An old capture message for money that has moved since (refunded at the provider,
  -- disputed): the later movement already decided; nothing changes.
  code = 'STALE'
elseif outcome == c.state then
  code = outcome
else
  -- A decline or failure after a capture (or after the other of the two): the provider
  -- contradicts its own final word. Money it holds stays accounted as it is; ops are alerted and
  -- reconciliation against the provider's records settles it.
  raise_alert(ctx, 'pev/' .. pev, h, c, 'provider_said_' .. outcome .. '_after_' .. c.state,
    claimed)
  code = 'CONTRADICTION'
end
return finish(code, c, h, '')
