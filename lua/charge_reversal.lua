--[[ charge_reversal: money the provider moved after a capture (a refund, a dispute), verified against our charge, once per provider event.
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[1] provider_event_id   ARGV[2] provider idempotency key (our charge id)   ARGV[3] attempt_id
ARGV[4] REFUND|DISPUTE_OPENED|DISPUTE_WON|DISPUTE_LOST   ARGV[5] amount (minor units; 'invalid' if not an integer)
ARGV[6] currency   ARGV[7] metadata event id
Returns {code, ...}: code charge_id charge_state hold_id hold_state first_seen(1|0), code one of
  REFUNDED | MONEY_LEFT | DISPUTED | REINSTATED | REFUND | CHARGED_BACK | DUPLICATE |
  NOTED | CONTRADICTION | MISMATCH | RETRY_LATER | NOT_FOUND
  (RETRY_LATER only while the event is being rebuilt: nothing is recorded)
Invariants: a refund we asked for (REFUNDING) becomes REFUNDED; a refund or dispute of a winning
charge is never silent: the charge moves to PROVIDER_REFUNDED or DISPUTED and its hold to
EXCEPTION (seat still assigned, for ops) or REVOKED (seat back on sale), by the event's reversal
policy; a dispute of money we were giving back stops that refund; a won dispute gives the seat
its money back, or, if the seat was revoked (or never had it) meanwhile, sends the money back to
the buyer; a message that does not match the charge's binding (key, event,
currency) changes nothing but an alert; the first terminal record of a charge or hold is never
repeated; a movement reported before the capture it follows (or a dispute's end before its
start) is verified, noted on the charge (NOTED, answered 200) and applied when its predecessor
lands (lua/_money.lua): every delivery order ends as the in-order one does (ADR 0036). ]]
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
-- An attempt not bound yet: its capture has not reached us (reordered delivery). The movement
-- is verified against the charge the key names and noted there for that capture to apply.
local unbound = false
if not c and key ~= '' then
  c = get_charge(key)
  unbound = c ~= nil
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
local move = { pev = pev, kind = kind, attempt = attempt, claimed = claimed }
if unbound then
  move_note(ctx, c, h, move)
  return finish('NOTED', c, h)
end
local amount = tonumber(amount_raw)
local held, parted = money_captured(c), c.parted or 0
-- The amount the charge holds, or what is left after our parts, or (a refund) our parts as the
-- provider reports them: expected. Anything else is applied as _money.lua says, and ops see it.
local expected = amount == held or amount == held - parted
  or (kind == 'REFUND' and amount and amount > 0 and amount <= parted)
if not move_early(c, kind) and not expected then
  raise_alert(ctx, 'pev/' .. pev, h, c, 'partial_or_wrong_amount:' .. string.lower(kind), claimed)
end
local code = move_apply(ctx, c, h, move)
-- A dispute opened may be what a noted end of that dispute waited for.
if code ~= 'NOTED' then moves_due(ctx, c, h) end
return finish(code, c, h)
