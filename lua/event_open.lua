--[[ event_open: open the sale at T0 (server clock); claims before T0 are refused.
KEYS[1..21] the event key set (engine/keys.py EVENT_KEYS, documented in _lib.lua)
ARGV[1] opens_at_ms (0 = now, by the server clock)
Returns {code, ...}: OPENED opens_at_ms | NOT_FOUND
Invariants: opening never touches seats, holds or counters. ]]
local ctx = context()
if not ctx then return { 'NOT_FOUND' } end
local at = tonumber(ARGV[1])
if not at or at < 0 then return redis.error_reply('BAD_ARGS opens_at_ms') end
if at == 0 then at = ctx.now end
redis.call('HSET', K_EVENT, 'status', 'open', 'opens_at_ms', at)
return { 'OPENED', at }
