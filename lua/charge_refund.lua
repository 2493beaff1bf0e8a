--[[ charge_refund: record the provider's answer to our refund request (REFUNDING -> REFUNDED), park a refund the provider's records disown, or make a refund due now at a person's request.
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[1] charge_id   ARGV[2] REFUNDED|FAILED|PARKED|RETRY   ARGV[3] retry_delay_ms (used when FAILED)
ARGV[4] why (used when PARKED)
Returns {code, ...}: REFUNDED | ALREADY_REFUNDED | RETRY_SCHEDULED attempts | PARKED |
  DUE_NOW attempts was_parked(0|1) | NOT_REFUNDING state | NOT_FOUND
Invariants: REFUNDED is a sink, recorded as the charge's terminal record only if it has none yet
(a contradicted decline has one); a failed refund stays queued with a later due time, never
dropped; a parked refund leaves the queue but stays REFUNDING, visible to ops with an alert,
because the provider says the money is not this charge's to return. RETRY (an operator's "retry
this refund") only moves a REFUNDING charge's refund to now and lifts its park: the refund worker
still asks the provider whose money it is before it refunds, so a retry can never return money
that is not this charge's; it is idempotent and never touches a charge in any other state. ]]
local charge_id, result, delay = ARGV[1], ARGV[2], tonumber(ARGV[3])
if result ~= REFUNDED and result ~= FAILED and result ~= 'PARKED' and result ~= 'RETRY' then
  return redis.error_reply('BAD_ARGS result')
end
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
if result == 'RETRY' then
  if c.state ~= REFUNDING then return { 'NOT_REFUNDING', c.state } end
  local was_parked = c.parked or 0
  if was_parked ~= 0 then
    c.parked = 0
    put_charge(c)
  end
  refund_due(ctx.now, charge_id)
  return { 'DUE_NOW', c.refund_attempts, was_parked }
end
if result == 'PARKED' then
  redis.call('ZREM', K_REFUNDS, charge_id)
  if (c.parked or 0) == 0 then
    c.parked = 1
    put_charge(c)
    raise_alert(ctx, 'refund/' .. c.id, nil, c, 'refund_parked:' .. (ARGV[4] or ''),
      { attempt = c.attempt or '', key = c.key or c.id })
  end
  return { 'PARKED' }
end
if result == FAILED then
  c.refund_attempts = c.refund_attempts + 1
  put_charge(c)
  refund_due(ctx.now + delay, charge_id)
  return { 'RETRY_SCHEDULED', c.refund_attempts }
end
redis.call('ZREM', K_REFUNDS, charge_id)
charge_move(c, REFUNDED)
c.decided_ms = ctx.now
charge_record(ctx, c, REFUNDING, nil, c.reason)
return { 'REFUNDED' }
