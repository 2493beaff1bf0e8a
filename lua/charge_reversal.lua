--[[ charge_reversal: money the provider moved after a capture (a refund, a dispute), verified against our charge, once per provider event.
KEYS[1..21] the event key set (engine/keys.py EVENT_KEYS, documented in _lib.lua)
ARGV[1] provider_event_id   ARGV[2] provider idempotency key (our charge id)   ARGV[3] attempt_id
ARGV[4] REFUND|DISPUTE_OPENED|DISPUTE_WON|DISPUTE_LOST   ARGV[5] amount (minor units; 'invalid' if not an integer)
ARGV[6] currency   ARGV[7] metadata event id
Returns {code, ...}: code charge_id charge_state hold_id hold_state first_seen(1|0), code one of
  REFUNDED | MONEY_LEFT | DISPUTED | REINSTATED | REFUND | CHARGED_BACK | DUPLICATE |
  CONTRADICTION | MISMATCH | RETRY_LATER | NOT_FOUND
Invariants: a refund we asked for (REFUNDING) becomes REFUNDED; a refund or dispute of a winning
charge is never silent: the charge moves to PROVIDER_REFUNDED or DISPUTED and its hold to
EXCEPTION (seat still assigned, for ops) or REVOKED (seat back on sale), by the event's reversal
policy; a dispute of money we were giving back stops that refund; a won dispute gives the seat
its money back, or, if the seat was revoked (or never had it) meanwhile, sends the money back to
the buyer; a message that does not match the charge's binding (key, event,
currency) changes nothing but an alert; the first terminal record of a charge or hold is never
repeated; a movement reported before the capture it reverses is retried later. ]]
local pev, key, attempt, kind = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local amount_raw, currency, m_event = ARGV[5], ARGV[6], ARGV[7]
if pev == '' or attempt == '' then return redis.error_reply('BAD_ARGS event and attempt ids') end
if kind ~= 'REFUND' and kind ~= 'DISPUTE_OPENED' and kind ~= 'DISPUTE_WON'
  and kind ~= 'DISPUTE_LOST' then
  return redis.error_reply('BAD_ARGS kind ' .. tostring(kind))
end
local ctx = context()
if not ctx then return { 'NOT_FOUND', key, '', '', '', 1 } end
if not deciding(ctx.cfg) then return { 'RETRY_LATER', key, '', '', '', 1 } end
local recorded = recorded_reply(pev)
if recorded then return recorded end
local claimed = { provider_event = pev, key = key, attempt = attempt, kind = kind,
  amount = amount_raw, currency = currency, meta_event = m_event }

local function finish(code, c, h)
  local reply = { code, c and c.id or key, c and c.state or '', c and c.hold or '',
    h and h.state or '', 1 }
  redis.call('HSET', K_CALLBACKS, pev, cjson.encode(reply))
  return reply
end

local by_attempt = redis.call('HGET', K_ATTEMPTS, attempt)
local c = by_attempt and get_charge(by_attempt) or nil
if not c and key ~= '' and get_charge(key) then
  -- Our charge, but its capture has not reached us yet (reordered delivery): nothing is
  -- recorded, the provider retries, and the capture binds the attempt first.
  local k = get_charge(key)
  return { 'RETRY_LATER', k.id, k.state, k.hold, '', 1 }
end
if not c then
  raise_alert(ctx, 'pev/' .. pev, nil, nil, 'unknown_charge:' .. string.lower(kind), claimed)
  return finish('MISMATCH', nil, nil)
end
local h = nil
if c.hold ~= '' then h = get_hold(c.hold) end
local problems = {}
if key ~= (c.key or c.id) then problems[#problems + 1] = 'charge' end
if m_event ~= ctx.cfg.id then problems[#problems + 1] = 'event' end
if currency ~= ctx.cfg.currency then problems[#problems + 1] = 'currency' end
if #problems > 0 then
  raise_alert(ctx, 'pev/' .. pev, h, c, 'mismatch:' .. table.concat(problems, ','), claimed)
  return finish('MISMATCH', c, h)
end
-- A movement reported before the capture it reverses: let the capture land first.
if c.state == CHARGING then return { 'RETRY_LATER', c.id, c.state, c.hold, h and h.state or '', 1 } end
local amount = tonumber(amount_raw)
local held = c.amount
if (c.captured or 0) > 0 then held = c.captured end
if amount ~= held then
  -- Partial movements are not modelled: the whole charge is treated as moved, and ops see it.
  raise_alert(ctx, 'pev/' .. pev, h, c, 'partial_or_wrong_amount:' .. string.lower(kind), claimed)
end

local wins = h and h.winner == c.id
local reason = 'provider_' .. string.lower(kind)
local code
if kind == 'REFUND' then
  if c.state == REFUNDING then
    c.state = REFUNDED
    c.decided_ms = ctx.now
    redis.call('ZREM', K_REFUNDS, c.id)
    charge_record(ctx, c, REFUNDING, h, c.reason)
    code = 'REFUNDED'
  elseif c.state == CAPTURED then
    c.state = PROVIDER_REFUNDED
    charge_record(ctx, c, CAPTURED, h, reason, pev)
    if wins and h.state == CONFIRMED then
      hold_after_sale(ctx, h, ctx.cfg.reversal_policy == 'revoke' and REVOKED or EXCEPTION,
        'money_refunded_at_provider', pev)
    end
    code = 'MONEY_LEFT'
  elseif c.state == REFUNDED or c.state == PROVIDER_REFUNDED then
    code = 'DUPLICATE'
  else
    raise_alert(ctx, 'pev/' .. pev, h, c, 'refund_while_' .. c.state, claimed)
    code = 'CONTRADICTION'
  end
elseif kind == 'DISPUTE_OPENED' then
  if c.state == CAPTURED then
    c.state = DISPUTED
    charge_record(ctx, c, CAPTURED, h, reason, pev)
    if wins and h.state == CONFIRMED then
      hold_after_sale(ctx, h, EXCEPTION, 'money_disputed', pev)
    end
    code = 'DISPUTED'
  elseif c.state == REFUNDING then
    -- The buyer disputed money we were about to give back: the provider withdrew it, so our
    -- refund must not go out as well; the dispute's outcome decides what happens next.
    c.state = DISPUTED
    redis.call('ZREM', K_REFUNDS, c.id)
    charge_record(ctx, c, REFUNDING, h, reason, pev)
    code = 'DISPUTED'
  elseif c.state == DISPUTED then
    code = 'DUPLICATE'
  else
    raise_alert(ctx, 'pev/' .. pev, h, c, 'dispute_while_' .. c.state, claimed)
    code = 'CONTRADICTION'
  end
elseif kind == 'DISPUTE_WON' then
  if c.state == DISPUTED then
    if wins and h.state == EXCEPTION then
      c.state = CAPTURED
      charge_record(ctx, c, DISPUTED, h, reason, pev)
      hold_after_sale(ctx, h, CONFIRMED, 'dispute_won', pev)
      code = 'REINSTATED'
    else
      -- The seat was taken back meanwhile: the money that came back has no seat to pay for.
      c.state = REFUNDING
      c.decided_ms = ctx.now
      c.reason = 'dispute_won_without_seat'
      redis.call('ZADD', K_REFUNDS, ctx.now, c.id)
      charge_record(ctx, c, DISPUTED, h, c.reason, pev)
      code = 'REFUND'
    end
  elseif c.state == CAPTURED or c.state == REFUNDING then
    code = 'DUPLICATE'
  else
    raise_alert(ctx, 'pev/' .. pev, h, c, 'dispute_won_while_' .. c.state, claimed)
    code = 'CONTRADICTION'
  end
else -- DISPUTE_LOST
  if c.state == DISPUTED then
    c.state = CHARGED_BACK
    charge_record(ctx, c, DISPUTED, h, reason, pev)
    if wins and h.state == EXCEPTION and ctx.cfg.reversal_policy == 'revoke' then
      hold_after_sale(ctx, h, REVOKED, 'dispute_lost', pev)
    end
    code = 'CHARGED_BACK'
  elseif c.state == CHARGED_BACK then
    code = 'DUPLICATE'
  else
    raise_alert(ctx, 'pev/' .. pev, h, c, 'dispute_lost_while_' .. c.state, claimed)
    code = 'CONTRADICTION'
  end
end
return finish(code, c, h)
