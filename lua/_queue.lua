--[[ _queue: the waiting room's shared part (ADR 0029), in the library after _lib.lua (whose
context(), clock and SALE_ENDED it uses), for the lua/queue_*.lua scripts (bind_queue_keys).
The queue scripts get keys of their own, all under the event's hash tag (engine/model/keys.py
queue_keys), not the event key set:
KEYS[1] event hash (as for every script: config() and the test clock read it; only the free,
  held and blocked counters are read besides)
KEYS[2] queue hash: settings (per_s, factor_pct, ttl_ms, auto, secret) and state (seq, pre,
  first_ms, drawn, cursor, admitted, used, lapsed, tokens, stamp_ms, rate, rate_ms)
KEYS[3] entries hash (login -> 'score|admitted_ms|hold_id|joined_ms')
KEYS[4] order zset (login -> place score: draw * 2^20 + seq before T0, 2^52 + seq from T0 on)
KEYS[5] lapses zset: the admissions that count against the free units. Login admitted and not
  yet used -> ms its admission lapses (positive); SPENT .. login (a space before the login)
  whose admission a claim spent and whose claim may not have landed yet -> minus the ms this
  stops counting (negative)
KEYS[6] the event's outbox: every change of the room that a rebuild must put back (its
  settings, a place taken, an admission, a spend) is a record there, so the ledger holds the
  room (kind 'queue', to a QueueMove of engine/model/records.py; ADR 0029)
Of _lib.lua's K_* names only K_EVENT and K_OUTBOX name their keys here.
Places are exact integers below 2^53 (Lua numbers are doubles) and are stored as the strings
'%.0f' makes of them, never through cjson (which keeps 14 digits). ]]

local K_QUEUE, K_ENTRIES, K_ORDER, K_LAPSES

local function bind_queue_keys(keys)  -- after bind_keys, at every call of a queue script
  K_QUEUE, K_ENTRIES, K_ORDER, K_LAPSES = keys[2], keys[3], keys[4], keys[5]
  K_OUTBOX = keys[6]
end
local SEQ_SPAN = 1048576  -- 2^20: under each draw, room for this many arrivals before T0
local AFTER_T0 = 4503599627370496  -- 2^52: every place taken from T0 on is after every draw
local SPENT = ' '  -- a lapses member spent by a claim in flight: ' ' .. login (no login has a
-- space: api/identity.py valid_login)
local RATE_TAU_MS = 5000  -- the admission rate told to clients averages about this long

-- A change of the room, recorded in the outbox (a decision numbered like any other, so a Redis
-- that lost it is fenced, ADR 0017): `id` the login (the event for the room's own moves),
-- `suffix` what makes the decision id unique, `extra` the move's own fields.
local function queue_record(ctx, id, move, login, hold, suffix, extra)
  ctx.extra = extra
  return emit(ctx, 'queue', id, '', move, 0, { id = hold, seat = '', login = login,
    winner = '' }, nil, '', suffix)
end

local function queue_settings()
  local v = redis.call('HMGET', K_QUEUE, 'per_s', 'factor_pct', 'ttl_ms', 'drawn', 'cursor',
    'admitted', 'tokens', 'stamp_ms', 'rate', 'rate_ms', 'pre', 'first_ms')
  if not v[1] then return nil end
  return { per_s = tonumber(v[1]), factor_pct = tonumber(v[2]), ttl_ms = tonumber(v[3]),
    drawn = v[4] == '1', cursor = v[5] or '-1', admitted = tonumber(v[6]) or 0,
    tokens = tonumber(v[7]), stamp_ms = tonumber(v[8]) or 0, rate = tonumber(v[9]) or 0,
    rate_ms = tonumber(v[10]) or 0, pre = tonumber(v[11]) or 0,
    first_ms = tonumber(v[12]) or 0 }
end

local function entry_get(login)
  local raw = redis.call('HGET', K_ENTRIES, login)
  if not raw then return nil end
  local score, admitted, hold, joined = string.match(raw, '^([^|]+)|([^|]+)|([^|]*)|([^|]+)$')
  return { login = login, score = score, admitted_ms = tonumber(admitted), hold = hold,
    joined_ms = tonumber(joined) }
end

local function entry_put(e)
  redis.call('HSET', K_ENTRIES, e.login,
    string.format('%s|%.0f|%s|%.0f', e.score, e.admitted_ms, e.hold, e.joined_ms))
end

-- The event's free, held and blocked units. Sold out for good is all three at 0: nothing is
-- free, and no live hold or late payment holds a unit that could come back (only an operator's
-- revoke or a provider's refund of a sold seat could, and then admissions resume).
local function units_now()
  local v = redis.call('HMGET', K_EVENT, 'free', 'held', 'blocked')
  return tonumber(v[1]) or 0, tonumber(v[2]) or 0, tonumber(v[3]) or 0
end

local function entry_state(q, e, now)
  if e.hold ~= '' then return 'USED' end
  if e.admitted_ms == 0 then return 'WAITING' end
  if now >= e.admitted_ms + q.ttl_ms then return 'LAPSED' end
  return 'ADMITTED'
end

-- Admissions per second, averaged exponentially over about RATE_TAU_MS: each admission adds
-- 1000 / RATE_TAU_MS when made, and the sum decays with time (read without writing).
local function rate_now(q, now)
  if q.rate_ms == 0 then return 0 end
  return q.rate * math.exp(-math.max(0, now - q.rate_ms) / RATE_TAU_MS)
end
