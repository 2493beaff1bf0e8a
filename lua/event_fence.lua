--[[ event_fence: stop deciding anything for an event whose Redis went back in time.
KEYS[1..21] the event key set (engine/keys.py EVENT_KEYS, documented in _lib.lua)
ARGV[1] reason
Returns {code, ...}: FENCED | ALREADY_FENCED | NOT_FOUND
Invariants: only the status moves (to 'fenced', with its reason and time): claims and charge starts
are refused and provider messages told to retry (every one needs status 'open') until the event
is rebuilt from the ledger, which replaces it; holds, seats and charges are left as they are. ]]
local ctx = context()
if not ctx then return { 'NOT_FOUND' } end
if ctx.cfg.status == 'fenced' then return { 'ALREADY_FENCED' } end
redis.call('HSET', K_EVENT, 'status', 'fenced', 'fenced_reason', ARGV[1], 'fenced_at_ms', ctx.now)
return { 'FENCED' }
