--[[ event_open: open the sale at T0 (server clock); claims before T0 are refused.
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[1] opens_at_ms (0 = now, by the server clock)   ARGV[2] '1': move T0 of an open event
Returns {code, ...}: OPENED opens_at_ms | ALREADY_OPEN opens_at_ms | STARTED opens_at_ms |
  CLOSED status | NOT_FOUND
Invariants: opening never touches seats, holds or counters; an open event's T0 moves only when
asked to (ARGV[2]) and only before it (now < opens_at_ms): once the sale started it stays; a
closed or cancelled sale never opens again. ]]
local ctx = context()
if not ctx then return { 'NOT_FOUND' } end
local at = tonumber(ARGV[1])
if not at or at < 0 then return redis.error_reply('BAD_ARGS opens_at_ms') end
if SALE_ENDED[ctx.cfg.status] then return { 'CLOSED', ctx.cfg.status } end
if ctx.cfg.status == 'open' then
  if ARGV[2] ~= '1' then return { 'ALREADY_OPEN', ctx.cfg.opens_at_ms } end
  if ctx.now >= ctx.cfg.opens_at_ms then return { 'STARTED', ctx.cfg.opens_at_ms } end
end
if at == 0 then at = ctx.now end
redis.call('HSET', K_EVENT, 'status', 'open', 'opens_at_ms', at)
return { 'OPENED', at }
