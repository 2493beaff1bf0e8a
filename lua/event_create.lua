--[[ event_create: create an event's config in DRAFT, ready for seats or stock; idempotent by event id.
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[1] event_id   ARGV[2] hold_ttl_ms   ARGV[3] quarantine_ms   ARGV[4] policy (quarantine|release_refund)
ARGV[5] currency (ISO 4217, default EUR)   ARGV[6] reversal policy (manual|revoke, default manual)
ARGV[7] kind (seats|stock, default seats)   ARGV[8] stock locations in preference order,
  comma-separated ('' for seats)   ARGV[9] units one claim may ask for (0: the API's limit)
ARGV[10] units a login may hold and buy ('' : the deployment's cap, 0: none)
Returns {code, ...}: CREATED | EXISTS
Invariants: an existing event's config and counters are never overwritten; `restocks` starts
above every value an earlier event of the same id reached. ]]
local ttl, qms = tonumber(ARGV[2]), tonumber(ARGV[3])
if (not ttl) or ttl <= 0 or (not qms) or qms <= 0 then
  return redis.error_reply('BAD_ARGS hold_ttl_ms and quarantine_ms must be positive integers')
end
if ARGV[4] ~= 'quarantine' and ARGV[4] ~= 'release_refund' then
  return redis.error_reply('BAD_ARGS unknown policy ' .. tostring(ARGV[4]))
end
local currency, reversal = ARGV[5] or 'EUR', ARGV[6] or 'manual'
if not string.match(currency, '^[A-Z][A-Z][A-Z]$') then
  return redis.error_reply('BAD_ARGS currency ' .. tostring(currency))
end
if reversal ~= 'manual' and reversal ~= 'revoke' then
  return redis.error_reply('BAD_ARGS unknown reversal policy ' .. tostring(reversal))
end
local kind, locations = ARGV[7] or 'seats', ARGV[8] or ''
local max_party, login_cap = tonumber(ARGV[9] or 0), ARGV[10] or ''
if kind ~= 'seats' and kind ~= 'stock' then
  return redis.error_reply('BAD_ARGS unknown kind ' .. tostring(kind))
end
if (kind == 'stock') ~= (locations ~= '') or not string.match(locations, '^[%w_.:,-]*$') then
  return redis.error_reply('BAD_ARGS a stock event names its locations, a seat event none')
end
if not max_party or max_party < 0 or (login_cap ~= '' and not tonumber(login_cap)) then
  return redis.error_reply('BAD_ARGS max_party and login_cap')
end
if redis.call('HSETNX', K_EVENT, 'id', ARGV[1]) == 0 then return { 'EXISTS' } end
-- `restocks` (lua/_lib.lua restocked) starts at the creation time, not 0: an event dropped and
-- created again (a rebuild) never repeats a count of its earlier life, so no API process can
-- mistake its memory of the old event for the new one (engine/gate/soldout.py).
local now = now_ms()
redis.call('HSET', K_EVENT, 'status', 'draft', 'hold_ttl_ms', ttl, 'quarantine_ms', qms,
  'policy', ARGV[4], 'opens_at_ms', 0, 'seats_total', 0, 'free', 0, 'held', 0, 'blocked', 0,
  'sold', 0, 'created_ms', now, 'restocks', now, 'currency', currency,
  'reversal_policy', reversal, 'kind', kind, 'locations', locations, 'max_party', max_party)
if login_cap ~= '' then redis.call('HSET', K_EVENT, 'login_cap', tonumber(login_cap)) end
redis.call('SPUBLISH', K_RESTOCKED, now) -- drops any memory of an earlier life
return { 'CREATED' }
