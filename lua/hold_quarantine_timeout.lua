--[[ hold_quarantine_timeout: past the quarantine hard timeout, put blocked seats back on sale.
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[1] batch_max (holds examined per call)
Returns {code, ...}: SWEPT examined expired freed remaining_due | NOT_FOUND
Invariants: a QUARANTINED hold past until_ms goes EXPIRED and its charge is marked
resolve-by-refund; a RELEASED hold's BLOCKED seat goes FREE; nothing else changes. ]]
local ctx = context()
if not ctx then return { 'NOT_FOUND' } end
local batch = tonumber(ARGV[1])
if not batch or batch < 1 then return redis.error_reply('BAD_ARGS batch_max') end
local due = redis.call('ZRANGEBYSCORE', K_QUARANTINES, '-inf', ctx.now, 'LIMIT', 0, batch)
local expired, freed = 0, 0
for _, hold_id in ipairs(due) do
  local h = get_hold(hold_id)
  if not h then
    error({ err = 'INVARIANT quarantine for unknown hold ' .. hold_id })
  end
  local was = h.state
  settle(ctx, h)
  if was == QUARANTINED and h.state == EXPIRED then expired = expired + 1 end
  if was == RELEASED and h.blocking == '' then freed = freed + 1 end
end
due_again(ctx)
local remaining = redis.call('ZCOUNT', K_QUARANTINES, '-inf', ctx.now)
return { 'SWEPT', #due, expired, freed, remaining }
