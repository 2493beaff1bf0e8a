--[[ queue_poll: join an event's waiting room, or look at one's place; first, whoever is next is
admitted, as fast as the admission rate and the free units allow (ADR 0029).
KEYS[1..6] the event hash, the queue keys and the outbox (engine/model/keys.py queue_keys; _queue.lua)
ARGV[1] login   ARGV[2] 'join' or 'look'   ARGV[3] the login's draw, 0 to 2^32 - 1: its place
  among those who join before T0 (the API derives it from the room's secret and the login, so
  a second tab or a rejoin draws the same)   ARGV[4] entries the room may hold (below 2^20)
Returns {code, ...}: the login's state, then position (1: the next admitted; 0: not waiting, or
  before T0) admitted rate_milli free held blocked admitted_ms hold_id opens_at_ms now entries
  pre created ttl_ms first_ms (the first join's time), for WAITING | ADMITTED | USED | LAPSED |
  SOLD_OUT | NOT_IN_QUEUE (a look by a login that never joined); or FULL | NO_QUEUE | NOT_OPEN
  opens_at_ms | CLOSED status | NOT_FOUND
Invariants: a login has one entry; a place never moves once taken: before T0 it is the login's
draw (every join before T0 is drawn, whatever its arrival), from T0 on it is after every draw,
in arrival order; only an entry whose admission was used or lapsed may join again, and then at
the end of the line; entries are admitted in place order, each once per place, at most the
token bucket's worth at a time, never before T0, and only while admissions not yet used stay
below factor_pct of the free units; a sold-out event (nothing free, held or blocked) admits no
one and takes no new entry; a look writes only when it admits or lapses someone; every place
taken is an outbox record PLACE_TAKEN (the login, its place) and every admitting call one
ADMITTED (the places after `place_from` up to `place`, `count` of them), so the ledger holds
the line as it is. ]]
local login, mode, draw, entries_max = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
if login == '' or (mode ~= 'join' and mode ~= 'look') or not draw or draw < 0
    or draw >= 4294967296 or draw ~= math.floor(draw) or not entries_max
    or entries_max >= SEQ_SPAN then
  return redis.error_reply('BAD_ARGS login, mode, draw and entries max')
end
local ADMIT_MAX = 1000  -- admissions (and lapses) one call makes: a bounded step

-- A new place at the end of its line: before T0 under its draw (seq breaks a tie of draws,
-- and stays below SEQ_SPAN: at most entries_max join before T0), from T0 on after every draw.
local function take_place(ctx, q)
  local seq = redis.call('HINCRBY', K_QUEUE, 'seq', 1)
  local score
  if q.drawn then
    score = AFTER_T0 + seq
  else
    score = draw * SEQ_SPAN + seq
    q.pre = redis.call('HINCRBY', K_QUEUE, 'pre', 1)
    if q.first_ms == 0 then
      q.first_ms = ctx.now
      redis.call('HSET', K_QUEUE, 'first_ms', ctx.now)
    end
  end
  local e = { login = login, score = string.format('%.0f', score), admitted_ms = 0, hold = '',
    joined_ms = ctx.now }
  entry_put(e)
  redis.call('ZADD', K_ORDER, e.score, login)
  redis.call('ZREM', K_LAPSES, login)
  queue_record(ctx, login, 'PLACE_TAKEN', login, '', seq, { 'place', e.score })
  return e
end

-- Lapse what is overdue, then admit the next places: as many as the bucket holds (it refills
-- at per_s, up to a quarter second's worth, full at T0), and no more than keep the admissions
-- not yet used, and the spent ones whose claims may still be on their way, within factor_pct of
-- the free units.
local function admit(ctx, q, free)
  local overdue = redis.call('ZRANGEBYSCORE', K_LAPSES, 0, ctx.now, 'LIMIT', 0, ADMIT_MAX)
  if #overdue > 0 then
    redis.call('ZREM', K_LAPSES, unpack(overdue))
    redis.call('HINCRBY', K_QUEUE, 'lapsed', #overdue)
  end
  redis.call('ZREMRANGEBYSCORE', K_LAPSES, -ctx.now, '(0')  -- spends whose claims have landed
  local room = math.ceil(free * q.factor_pct / 100) - redis.call('ZCARD', K_LAPSES)
  local burst = math.max(1, math.ceil(q.per_s / 4))
  local tokens = burst
  if q.tokens then
    tokens = math.min(burst, q.tokens + math.max(0, ctx.now - q.stamp_ms) * q.per_s / 1000)
  end
  local n = math.min(math.floor(tokens), room, ADMIT_MAX)
  if n < 1 then return end
  local next = redis.call('ZRANGEBYSCORE', K_ORDER, '(' .. q.cursor, '+inf', 'LIMIT', 0, n)
  if #next == 0 then return end
  local e
  local from = q.cursor
  for _, who in ipairs(next) do
    e = entry_get(who)
    e.admitted_ms = ctx.now
    entry_put(e)
    redis.call('ZADD', K_LAPSES, ctx.now + q.ttl_ms, who)
  end
  q.rate = rate_now(q, ctx.now) + #next * 1000 / RATE_TAU_MS
  q.cursor, q.admitted, q.rate_ms = e.score, q.admitted + #next, ctx.now
  redis.call('HSET', K_QUEUE, 'cursor', q.cursor, 'admitted', q.admitted,
    'tokens', string.format('%.3f', tokens - #next), 'stamp_ms', ctx.now,
    'rate', string.format('%.6f', q.rate), 'rate_ms', ctx.now)
  queue_record(ctx, ctx.cfg.id, 'ADMITTED', '', '', q.cursor,
    { 'place', q.cursor, 'place_from', from, 'count', #next })
end

local ctx = context()
if not ctx then return { 'NOT_FOUND' } end
local q = queue_settings()
if not q then return { 'NO_QUEUE' } end
if SALE_ENDED[ctx.cfg.status] then return { 'CLOSED', ctx.cfg.status } end
if ctx.cfg.status ~= 'open' then return { 'NOT_OPEN', ctx.cfg.opens_at_ms } end
local started = ctx.now >= ctx.cfg.opens_at_ms
if started and not q.drawn then  -- T0: the places drawn so far are final
  q.drawn = true
  redis.call('HSET', K_QUEUE, 'drawn', 1)
end
local free, held, blocked = units_now()
local over = free + held + blocked == 0
local e = entry_get(login)
local created = 0
if mode == 'join' and not over then
  local state = e and entry_state(q, e, ctx.now)
  if not e or state == 'USED' or state == 'LAPSED' then
    if not e and redis.call('ZCARD', K_ORDER) >= entries_max then return { 'FULL' } end
    e = take_place(ctx, q)
    created = 1
  end
end
if started and not over then
  admit(ctx, q, free)
  if e then e = entry_get(login) end  -- it may have been admitted just now
end
local state = 'NOT_IN_QUEUE'
if e then state = entry_state(q, e, ctx.now) end
if over and state ~= 'USED' then state = 'SOLD_OUT' end
local position = 0
if state == 'WAITING' and q.drawn then
  position = redis.call('ZCOUNT', K_ORDER, '(' .. q.cursor, e.score)
end
return { state, position, q.admitted, math.floor(rate_now(q, ctx.now) * 1000), free, held,
  blocked, e and e.admitted_ms or 0, e and e.hold or '', ctx.cfg.opens_at_ms, ctx.now,
  redis.call('ZCARD', K_ORDER), q.pre, created, q.ttl_ms, q.first_ms }
