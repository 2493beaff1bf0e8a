--[[ hold_expire: the sweeper's step, expire-if-still-held for a bounded batch of overdue holds.
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[1] batch_max (holds examined per call)
Returns {code, ...}: SWEPT examined expired quarantined remaining_due | NOT_FOUND
Invariants: only holds still RESERVED with now >= expires_ms change (the deadline rule in
_lib.lua settle); with a charge in flight the hold goes QUARANTINED under the quarantine policy
(seat BLOCKED), or EXPIRED with its charge marked resolve-by-refund under release_refund; under
a grace policy it stays RESERVED (a GRACE record) until the grace ends, then as release_refund. ]]
local ctx = context()
if not ctx then return { 'NOT_FOUND' } end
local batch = tonumber(ARGV[1])
if not batch or batch < 1 then return redis.error_reply('BAD_ARGS batch_max') end
local due = redis.call('ZRANGEBYSCORE', K_DEADLINES, '-inf', ctx.now, 'LIMIT', 0, batch)
local expired, quarantined = 0, 0
for _, hold_id in ipairs(due) do
  local h = get_hold(hold_id)
  if not h then
    error({ err = 'INVARIANT deadline for unknown hold ' .. hold_id })
  end
  settle(ctx, h)
  if h.state == EXPIRED then expired = expired + 1 end
  if h.state == QUARANTINED then quarantined = quarantined + 1 end
end
due_again(ctx)
local remaining = redis.call('ZCOUNT', K_DEADLINES, '-inf', ctx.now)
return { 'SWEPT', #due, expired, quarantined, remaining }
