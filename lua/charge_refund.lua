--[[ charge_refund: record the provider's answer to a refund request (REFUNDING -> REFUNDED).
KEYS[1..14] the event key set (engine/keys.py EVENT_KEYS, documented in _lib.lua)
ARGV[1] charge_id   ARGV[2] REFUNDED|FAILED   ARGV[3] retry_delay_ms (used when FAILED)
Returns {code, ...}: REFUNDED | ALREADY_REFUNDED | RETRY_SCHEDULED attempts |
  NOT_REFUNDING state | NOT_FOUND
Invariants: REFUNDED is a sink recorded once in the outbox; a failed refund stays queued with a
later due time, never dropped. ]]
local charge_id, result, delay = ARGV[1], ARGV[2], tonumber(ARGV[3])
if result ~= REFUNDED and result ~= FAILED then return redis.error_reply('BAD_ARGS result') end
if not delay or delay < 0 then return redis.error_reply('BAD_ARGS retry_delay_ms') end
local ctx = context()
if not ctx then return { 'NOT_FOUND' } end
local c = get_charge(charge_id)
if not c then return { 'NOT_FOUND' } end
local queued = redis.call('ZSCORE', K_REFUNDS, charge_id)
if c.state == REFUNDED and result == REFUNDED then
  redis.call('ZREM', K_REFUNDS, charge_id)
  return { 'ALREADY_REFUNDED' }
end
if c.state ~= REFUNDING and not (c.state == REFUNDED and queued) then
  return { 'NOT_REFUNDING', c.state }
end
if result == FAILED then
  c.refund_attempts = c.refund_attempts + 1
  put_charge(c)
  redis.call('ZADD', K_REFUNDS, ctx.now + delay, charge_id)
  return { 'RETRY_SCHEDULED', c.refund_attempts }
end
redis.call('ZREM', K_REFUNDS, charge_id)
c.state = REFUNDED
c.decided_ms = ctx.now
put_charge(c)
emit(ctx, 'charge', c.id, REFUNDING, REFUNDED, 1, nil, c, c.reason)
return { 'REFUNDED' }
