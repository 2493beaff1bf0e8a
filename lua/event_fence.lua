--[[ event_fence: stop deciding anything for an event whose Redis went back in time.
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[1] reason   ARGV[2] the ledger's last decision number, or '' (fence whatever the number)
Returns {code, ...}: FENCED | ALREADY_FENCED | REBUILDING | CURRENT | NOT_FOUND
Invariants: an event being rebuilt is never fenced (REBUILDING), and with ARGV[2] an event whose
decision number has reached the ledger's is not either (CURRENT): the look that found it behind
may be older than a rebuild that caught up; only the status moves (to 'fenced', with its reason and time): claims and charge starts
are refused and provider messages told to retry (every one needs status 'open') until the event
is rebuilt from the ledger, which replaces it; holds, seats and charges are left as they are. ]]
local ctx = context()
if not ctx then return { 'NOT_FOUND' } end
if ctx.cfg.status == 'fenced' then return { 'ALREADY_FENCED' } end
if redis.call('HGET', K_EVENT, 'rebuilding') == '1' then return { 'REBUILDING' } end
local ledger_seq = tonumber(ARGV[2])
if ledger_seq and (tonumber(redis.call('HGET', K_EVENT, 'seq')) or 0) >= ledger_seq then
  return { 'CURRENT' }
end
redis.call('HSET', K_EVENT, 'status', 'fenced', 'fenced_reason', ARGV[1], 'fenced_at_ms', ctx.now)
return { 'FENCED' }
