--[[ hold_trim: drop ended holds that never had a charge, once the ledger holds their decision and the retention passed.
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua); it reads
  KEYS[19] ended zset and KEYS[5] holds hash, and deletes from them and from KEYS[7] logins hash;
  it sets the event's score in KEYS[24] the trim index to its oldest ended hold left
ARGV[1] retention_ms (a hold decided at or after now - retention_ms, by the server clock, stays)
ARGV[2] ledger floor, a stream id: every outbox entry below it is in the ledger
  ('+' only for a deployment without a ledger that chose to trim anyway, ONSALE_TRIM_WITHOUT_LEDGER)
ARGV[3] batch_max (ended holds examined per call)
Returns {code, ...}: TRIMMED trimmed more (more: 1 when another call now would trim further) |
  NOT_FOUND
Invariants: only a hold of the ended index goes (ended without a charge, ever: lua/_lib.lua
hold_end), and only once its decision record is below the ledger floor (a rebuild from the
ledger finds it) and it was decided before the retention (a claim retried within it still gets
its replay); a login still pointing at it goes with it. Trimming decides nothing: no outbox
record, no state changes; it removes a terminal record from Redis that the ledger holds. ]]
local ctx = context()
if not ctx then return { 'NOT_FOUND' } end
local retention, batch = tonumber(ARGV[1]), tonumber(ARGV[3])
if not retention or retention < 0 then return redis.error_reply('BAD_ARGS retention_ms') end
if not batch or batch < 1 then return redis.error_reply('BAD_ARGS batch_max') end

-- A stream id as {ms, seq}; '+' is past every id.
local function stream_id(s)
  if s == '+' then return { math.huge, 0 } end
  local ms, seq = string.match(s or '', '^(%d+)%-(%d+)$')
  if not ms then return nil end
  return { tonumber(ms), tonumber(seq) }
end

local floor = stream_id(ARGV[2])
if not floor then return redis.error_reply('BAD_ARGS ledger floor ' .. tostring(ARGV[2])) end

-- Whether the ledger holds the hold's decision. A hold restored from the ledger has no record
-- of this Redis: the ledger is where it came from.
local function in_ledger(h)
  if (h.record or '') == '' then
    if h.reason == 'restored' then return true end
    error({ err = 'INVARIANT ended hold ' .. h.id .. ' has no decision record' })
  end
  local r = stream_id(h.record)
  return r[1] < floor[1] or (r[1] == floor[1] and r[2] < floor[2])
end

local before = '(' .. (ctx.now - retention)
local due = redis.call('ZRANGEBYSCORE', K_ENDED, '-inf', before, 'LIMIT', 0, batch)
local trimmed, blocked = 0, false
for _, hold_id in ipairs(due) do
  local h = get_hold(hold_id)
  if not h then error({ err = 'INVARIANT ended index names unknown hold ' .. hold_id }) end
  if (h.state ~= RELEASED and h.state ~= EXPIRED) or h.charges ~= '' or h.blocking ~= '' then
    error({ err = 'INVARIANT ended index names hold ' .. hold_id .. ' in ' .. h.state })
  end
  -- Decisions are indexed in the order they were made, so the first one the ledger does not
  -- hold yet ends the batch: the ones after it were decided later still.
  if not in_ledger(h) then
    blocked = true
    break
  end
  redis.call('ZREM', K_ENDED, hold_id)
  redis.call('HDEL', K_HOLDS, hold_id)
  drop_login(h)
  trimmed = trimmed + 1
end
local more = 0
if not blocked and #due == batch and redis.call('ZCOUNT', K_ENDED, '-inf', before) > 0 then
  more = 1
end
index_exactly(K_TRIMS, K_ENDED)  -- the oldest ended hold left, or the event leaves it
return { 'TRIMMED', trimmed, more }
