--[[ _lib: the definitions every script shares, in the library after _keys.lua, the clock and
_states.lua (the states and their allowed moves, generated from engine/model/states.py).
The event's keys (K_*) and the identity maps are _keys.lua's, bound at each call.
Invariants kept here: free + held + blocked + sold = seats_total (units, for quantity stock);
a seat is in the free zset iff it has no owner entry; per sku and location, available + held +
blocked + sold = on_hand; every terminal transition XADDs exactly one outbox record. ]]

local ALERTS_MAX = 100000  -- the alerts hash stops growing here; the outbox still records all

-- The hold and charge states, HOLD_MOVES, CHARGE_MOVES and TERMINAL_CHARGE are _states.lua's,
-- generated from engine/model/states.py. A hold or a charge changes state only here: a move
-- the tables do not allow is a bug, and the call fails before it writes anything more.
local function hold_move(h, to)
  if not (HOLD_MOVES[h.state] or {})[to] then
    error({ err = 'INVARIANT hold ' .. h.id .. ' may not move from ' .. tostring(h.state)
      .. ' to ' .. to })
  end
  h.state = to
end

local function charge_move(c, to)
  if not (CHARGE_MOVES[c.state] or {})[to] then
    error({ err = 'INVARIANT charge ' .. c.id .. ' may not move from ' .. tostring(c.state)
      .. ' to ' .. to })
  end
  c.state = to
end

-- The enforced deadline policy is `policy` after a grace of `policy_grace_ms` (0: none), named
-- `policy_name` in every record with its version (1 until the event's first policy change); a
-- candidate may run in shadow beside it (lua/event_policy.lua, ADR 0020).
-- The config is read in two parts (ADR 0034): at once the fields every call or a claim needs
-- (does the event exist, is it on sale, the claim's limits), the rest (policies, currency, the
-- record's fields) on the first use of one of them in the same call. Each field is a hash
-- lookup that costs the call time, and a refused or plain claim uses none of the rest.
local CONFIG_HOT = { 'status', 'opens_at_ms', 'hold_ttl_ms', 'kind', 'max_party', 'login_cap',
  'due_at' }
local CONFIG_REST = { 'id', 'quarantine_ms', 'policy', 'currency', 'reversal_policy',
  'policy_grace_ms', 'policy_version', 'shadow_policy', 'shadow_version', 'locations' }

local function config_rest(cfg)
  local v = redis.call('HMGET', K_EVENT, unpack(CONFIG_REST))
  local grace_ms = tonumber(v[6]) or 0
  cfg.id, cfg.quarantine_ms, cfg.policy = v[1], tonumber(v[2]), v[3]
  cfg.currency, cfg.reversal_policy, cfg.grace_ms = v[4] or 'EUR', v[5] or 'manual', grace_ms
  cfg.policy_name = grace_ms > 0 and string.format('grace:%d', grace_ms) or v[3]
  cfg.policy_version, cfg.shadow_policy = tonumber(v[7]) or 1, v[8] or ''
  cfg.shadow_version, cfg.locations = tonumber(v[9]) or 0, v[10] or ''
end

-- Reading a field the first part did not read fills in the rest, once (then no metatable).
local CONFIG_LAZY = { __index = function(cfg, field)
  setmetatable(cfg, nil)
  config_rest(cfg)
  return rawget(cfg, field)
end }

local function config()
  local v = redis.call('HMGET', K_EVENT, unpack(CONFIG_HOT))
  if not v[1] then return nil end
  return setmetatable({ status = v[1], opens_at_ms = tonumber(v[2]) or 0,
    hold_ttl_ms = tonumber(v[3]), kind = v[4] or 'seats', max_party = tonumber(v[5]) or 0,
    login_cap = tonumber(v[6]) or false, due_at = tonumber(v[7]) or 0 }, CONFIG_LAZY)
  -- (false or 0, not nil: a read of nil is lazy)
end

-- The whole config now: before a script changes fields of it in place (lua/event_policy.lua).
local function config_full(cfg)
  if getmetatable(cfg) == CONFIG_LAZY then
    setmetatable(cfg, nil)
    config_rest(cfg)
  end
  return cfg
end

-- The due index (KEYS[23]): the sweeper looks at an event once its score there has come, so
-- the score is never later than the event's earliest deadline or quarantine end (it may be
-- earlier: a hold confirmed or released before its deadline makes the sweeper look once for
-- nothing, and its sweep sets the score right). `due_at` in the event hash mirrors the score,
-- so a deadline no earlier than it (every claim but the first after a sweep) writes nothing.
local function due_by(ctx, at)
  local cur = ctx.cfg.due_at
  if cur > 0 and cur <= at then return end
  redis.call('ZADD', K_DUE, at, ctx.cfg.id)
  redis.call('HSET', K_EVENT, 'due_at', at)
  ctx.cfg.due_at = at
end

-- After a sweep: the score becomes the event's earliest deadline or quarantine end, exactly, or
-- the event leaves the index when it has none.
local function due_again(ctx)
  local d = redis.call('ZRANGE', K_DEADLINES, 0, 0, 'WITHSCORES')
  local q = redis.call('ZRANGE', K_QUARANTINES, 0, 0, 'WITHSCORES')
  local at = math.min(tonumber(d[2]) or math.huge, tonumber(q[2]) or math.huge)
  if at == math.huge then
    redis.call('ZREM', K_DUE, ctx.cfg.id)
    redis.call('HDEL', K_EVENT, 'due_at')
    ctx.cfg.due_at = 0
    return
  end
  redis.call('ZADD', K_DUE, at, ctx.cfg.id)
  redis.call('HSET', K_EVENT, 'due_at', string.format('%.0f', at))
  ctx.cfg.due_at = at
end

-- A hold's fields that a fresh claim leaves empty are stored only once set (ADR 0034): the
-- claim encodes six fields, not thirteen. A hold read without one reads its empty value.
local HOLD_EMPTY = { __index = { charge = '', blocking = '', winner = '', until_ms = 0,
  decided_ms = 0, reason = '', charges = '' } }

local function hold_of(raw)
  return setmetatable(cjson.decode(raw), HOLD_EMPTY)
end

local function get_hold(hold_id)
  if HOLDS[hold_id] == nil then
    local raw = redis.call('HGET', K_HOLDS, hold_id)
    HOLDS[hold_id] = raw and hold_of(raw) or false
  end
  return HOLDS[hold_id] or nil
end

-- The first of two holds that exists, both read at once (a claim's replay looks in two windows).
local function get_hold_either(a, b)
  if HOLDS[a] == nil and HOLDS[b] == nil then
    local raw = redis.call('HMGET', K_HOLDS, a, b)
    HOLDS[a] = raw[1] and hold_of(raw[1]) or false
    HOLDS[b] = raw[2] and hold_of(raw[2]) or false
  end
  return get_hold(a) or get_hold(b)
end

local function put_hold(h)
  HOLDS[h.id] = h
  redis.call('HSET', K_HOLDS, h.id, cjson.encode(h))
end

local function get_charge(charge_id)
  if CHARGES[charge_id] == nil then
    local raw = redis.call('HGET', K_CHARGES, charge_id)
    CHARGES[charge_id] = raw and cjson.decode(raw) or false
  end
  return CHARGES[charge_id] or nil
end

-- The indexes across events (KEYS[24..26], engine/model/keys.py): a worker reads an event once
-- its score there has come, so a score is never later than the event's first work of that kind
-- (an earlier one only makes a worker look once for nothing; lua/event_reindex.lua sets it
-- right). `ZADD LT`, at most once per index and call for one score or a later one.
local function indexed_id()  -- the event's id, from its keys (no ctx in put_charge)
  EVENT_ID = EVENT_ID or string.match(K_EVENT, '{([^}]*)}:event$')
  return EVENT_ID
end

local function index_by(index, at)
  local written = INDEXED[index]
  if written and written <= at then return end
  redis.call('ZADD', index, 'LT', at, indexed_id())
  INDEXED[index] = at
end

-- The event's score in `index` exactly the first entry of `own`, or out of it when `own` is
-- empty (a worker found it with nothing to do, or work was removed).
local function index_exactly(index, own)
  local first = redis.call('ZRANGE', own, 0, 0, 'WITHSCORES')
  if first[2] then
    redis.call('ZADD', index, first[2], indexed_id())
  else
    redis.call('ZREM', index, indexed_id())
  end
  INDEXED[index] = nil
end

-- A refund due at `at` (ms): queued for the refund worker, its event in the refund index.
local function refund_due(at, charge_id)
  redis.call('ZADD', K_REFUNDS, at, charge_id)
  index_by(K_REFUND_IX, at)
end

-- Every charge write keeps the watch index: provider reconciliation asks about a charge still
-- CHARGING (since it was created) or recently DECLINED/FAILED (since it was decided) by reading
-- this zset, never by scanning every charge of the event.
local function put_charge(c)
  CHARGES[c.id] = c
  -- When the charge last went REFUNDING, kept once REFUNDED: its capture-to-refund time.
  if c.state == REFUNDING then
    if not c.refunding_ms then c.refunding_ms = now_ms() end
  elseif c.state ~= REFUNDED then
    c.refunding_ms = nil
  end
  redis.call('HSET', K_CHARGES, c.id, cjson.encode(c))
  if c.state == CHARGING then
    redis.call('ZADD', K_WATCH, c.created_ms, c.id)
    index_by(K_WATCH_IX, c.created_ms)
  elseif c.state == DECLINED or c.state == FAILED then
    redis.call('ZADD', K_WATCH, c.decided_ms, c.id)
    index_by(K_WATCH_IX, c.decided_ms)
  else
    redis.call('ZREM', K_WATCH, c.id)
  end
end

-- Outbox: one record per decision, in the same atomic step that makes it. decision_id is
-- deterministic so the ledger can insert it idempotently (ON CONFLICT DO NOTHING). `seq`
-- numbers the event's decisions 1, 2, 3...: a Redis that went back in time (restarted from an
-- older snapshot) numbers its next decisions with numbers the ledger already holds (ADR 0017).
local function emit(ctx, kind, id, from, to, terminal, h, c, reason, suffix)
  local decision_id = kind .. ':' .. id .. ':' .. to
  if suffix then decision_id = decision_id .. ':' .. suffix end
  -- What the shadow candidate would have decided belongs to this record only (ADR 0020).
  local shadow_outcome = ctx.shadow_outcome or ''
  ctx.shadow_outcome = nil
  local seq = redis.call('HINCRBY', K_EVENT, 'seq', 1)
  local fields = {
    'decision_id', decision_id, 'event', ctx.cfg.id, 'kind', kind, 'id', id,
    'from', from, 'to', to, 'terminal', terminal,
    'hold', h and h.id or (c and c.hold or ''), 'charge', c and c.id or '',
    'seat', h and h.seat or (c and c.seat or ''), 'login', h and h.login or (c and c.login or ''),
    'winner', h and h.winner or '', 'amount', c and c.amount or 0,
    'attempt', c and c.attempt or '', 'intent', c and c.intent or '',
    'policy', ctx.cfg.policy_name, 'reason', reason or '', 'now_ms', ctx.now,
    'captured', c and c.captured or 0, 'seq', seq, 'policy_version', ctx.cfg.policy_version,
    'shadow_policy', ctx.cfg.shadow_policy, 'shadow_version', ctx.cfg.shadow_version,
    'shadow_outcome', shadow_outcome }
  -- A kind's own fields (a stock correction's mode and value), set by its script for this record.
  for _, field in ipairs(ctx.extra or {}) do fields[#fields + 1] = field end
  ctx.extra = nil
  return redis.call('XADD', K_OUTBOX, '*', unpack(fields))
end

-- What the provider captured on charge c (its parts give back some of it).
local function money_captured(c)
  if (c.captured or 0) > 0 then return c.captured end
  return c.amount
end

-- A charge's first terminal state is its one terminal record; later moves the provider forces
-- (a capture contradicting its decline, its own refund, a dispute) are further, non-terminal
-- records. `final` remembers that the terminal record exists (charges stored before the flag
-- existed are final exactly when their state is terminal).

local function charge_record(ctx, c, from, h, reason, suffix)
  local terminal = 0
  local final = c.final
  if final == nil then final = (TERMINAL_CHARGE[from] and 1 or 0) end
  if final == 0 and TERMINAL_CHARGE[c.state] then
    terminal = 1
    final = 1
  end
  c.final = final
  put_charge(c)
  -- An order that gave back parts, or that the provider refunded in part: its record names
  -- the money it gives back itself (ADR 0043).
  if (c.moved or 0) > 0 then
    ctx.extra = { 'returned', c.moved }
  elseif (c.parted or 0) > 0 then
    ctx.extra = { 'returned', money_captured(c) - c.parted }
  end
  return emit(ctx, 'charge', c.id, from, c.state, terminal, h, c, reason, suffix)
end

-- A provider message we refuse to act on (or only partly): kept for ops in the alerts hash
-- (bounded) and recorded in the outbox, so the ledger and the exceptions view both show it.
local function raise_alert(ctx, alert_id, h, c, reason, detail)
  if redis.call('HLEN', K_ALERTS) < ALERTS_MAX then
    detail.id = alert_id
    detail.reason = reason
    detail.at_ms = ctx.now
    detail.charge = c and c.id or (detail.charge or '')
    detail.hold = h and h.id or (c and c.hold or '')
    redis.call('HSET', K_ALERTS, alert_id, cjson.encode(detail))
  end
  emit(ctx, 'alert', alert_id, c and c.state or '', 'ALERT', 0, h, c, reason)
end

-- Process-once per provider event: the reply recorded the first time, marked not first-seen.
local function recorded_reply(provider_event_id)
  local raw = redis.call('HGET', K_CALLBACKS, provider_event_id)
  if not raw then return nil end
  local r = cjson.decode(raw)
  r[6] = 0
  return r
end

-- Seat inventory. A hold holds one or more seats (a party), listed comma-separated in its `seat`
-- field (seat ids never contain a comma); these are the only functions that know how a seat is
-- stored, so quantity stock can supply its own versions without touching the transitions.
local function counters(from, to, n)
  n = n or 1
  if from then redis.call('HINCRBY', K_EVENT, from, -n) end
  if to then return redis.call('HINCRBY', K_EVENT, to, n) end
end

local function seats_of(h)
  local out = {}
  for seat in string.gmatch(h.seat, '[^,]+') do out[#out + 1] = seat end
  return out
end

-- Quantity stock (lua/_stock.lua, ADR 0022): a stock hold's `seat` lists lines
-- '<sku>@<location>*<qty>' (a seat id never contains '*'). Defined there, used here.
local stock_move, stock_units

local function is_stock(h)
  return string.find(h.seat, '*', 1, true) ~= nil
end

-- Units a hold owns: its seats, or the sum of its stock lines' quantities.
local function units_of(h)
  if is_stock(h) then return stock_units(h.seat) end
  return #seats_of(h)
end

-- The event went from no free seat to one. API processes that answer "sold out" from memory
-- (engine/gate/soldout.py) drop that answer on this message; `restocks` counts these moments, so a
-- SOLD_OUT reply tells a process whether its memory of the sold-out event is still current.
local function restocked()
  local n = redis.call('HINCRBY', K_EVENT, 'restocks', 1)
  redis.call('SPUBLISH', K_RESTOCKED, n)
end

local OWNER_COUNTER = { H = 'held', B = 'blocked', S = 'sold' }

-- The most seats one hold owns, whatever the event's max_party: a hold's seats go into one
-- command (Lua unpacks at most about 8,000 values), so a larger one would fail halfway.
local HOLD_SEATS_MAX = 1000

-- The owner entry of every seat in `seats` set to `owner`, in one HSET: a party's seats are
-- one command, not one each.
local function owners_set(seats, owner)
  local args = {}
  for i, seat in ipairs(seats) do args[2 * i - 1], args[2 * i] = seat, owner end
  redis.call('HSET', K_OWNERS, unpack(args))
end

-- These seats, all of them checked free by the caller, to a new hold.
local function seats_take_specific(seats, hold_id)
  if redis.call('ZREM', K_FREE, unpack(seats)) ~= #seats then
    error({ err = 'INVARIANT seats ' .. table.concat(seats, ',') .. ' checked free but not in free set' })
  end
  owners_set(seats, 'H:' .. hold_id)
  counters('free', 'held', #seats)
end

local function seat_take_best(hold_id)
  local popped = redis.call('ZPOPMIN', K_FREE)
  if #popped == 0 then return nil end
  redis.call('HSET', K_OWNERS, popped[1], 'H:' .. hold_id)
  counters('free', 'held')
  return popped[1]
end

-- The best block of n adjacent free seats: consecutive ranks (r, r+1, ...) in one section,
-- the block whose first seat ranks best. Reads the free seats in rank order, in chunks that
-- start at 2n and double, and stops at the first block. Taking seats never makes a block, so
-- the rank where the last search for n found its block (or 'none') is kept in
-- `block_from:<n>` and the next search starts there; any seat coming back on sale (seat_move)
-- forgets every such hint. So the cost stays O(n log N) per party even on a map that
-- fragments as it sells (rows of 20, parties of 6: each row leaves 2); asked only for parties
-- (n > 1); nil when no such block is free.
local BLOCK_CHUNK_MAX, BLOCK_HINTS = 256, { 'block_from:2', 'block_from:3', 'block_from:4',
  'block_from:5', 'block_from:6' }
local function free_block(n)
  local hint = n <= #BLOCK_HINTS + 1 and 'block_from:' .. n or nil
  local from = hint and redis.call('HGET', K_EVENT, hint) or nil
  if from == 'none' then return nil end
  -- The run of adjacent free seats so far (ids; the first one's rank, kept for the hint).
  local run, run_from, last_rank, last_section = {}, nil, nil, nil
  local offset, chunk = 0, 2 * n  -- small first (a block is usually at the front), then wider
  while true do
    local free = redis.call('ZRANGE', K_FREE, from or '-inf', '+inf', 'BYSCORE', 'LIMIT', offset,
      chunk, 'WITHSCORES')
    if #free == 0 then
      if hint then redis.call('HSET', K_EVENT, hint, 'none') end
      return nil
    end
    local ids = {}
    for i = 1, #free, 2 do ids[#ids + 1] = free[i] end
    local sections = redis.call('HMGET', K_SECTIONS, unpack(ids))
    for i, seat in ipairs(ids) do
      local rank, section = tonumber(free[2 * i]), sections[i]
      if not (last_rank and rank == last_rank + 1 and section == last_section) then
        run, run_from = {}, free[2 * i]
      end
      run[#run + 1] = seat
      if #run >= n then
        if hint then redis.call('HSET', K_EVENT, hint, run_from) end
        return run
      end
      last_rank, last_section = rank, section
    end
    offset = offset + chunk
    chunk = math.min(2 * chunk, BLOCK_CHUNK_MAX)
  end
end

-- n seats for one hold: the best adjacent block, or else (the documented fallback) the n best
-- free seats. The caller checked that n seats are free.
local function seats_take_best(n, hold_id)
  local block = n > 1 and free_block(n) or nil
  if not block then
    block = {}
    local popped = redis.call('ZPOPMIN', K_FREE, n)
    for i = 1, #popped, 2 do block[#block + 1] = popped[i] end
  else
    redis.call('ZREM', K_FREE, unpack(block))
  end
  owners_set(block, 'H:' .. hold_id)
  counters('free', 'held', #block)
  return block
end

-- Move the seat of a one-seat hold (most holds): the commands of one seat, no tables.
local function one_seat_move(h, seat, to)
  local cur = redis.call('HGET', K_OWNERS, seat)
  if (not cur) or string.sub(cur, 3) ~= h.id then
    -- A bug, not an outcome: abort loudly (InvariantViolation on the Python side).
    error({ err = 'INVARIANT seat ' .. seat .. ' not owned once by hold ' .. h.id })
  end
  local from = OWNER_COUNTER[string.sub(cur, 1, 1)]
  if to then
    redis.call('HSET', K_OWNERS, seat, to .. ':' .. h.id)
    counters(from, OWNER_COUNTER[to])
    return
  end
  redis.call('HDEL', K_OWNERS, seat)
  redis.call('ZADD', K_FREE, redis.call('ZSCORE', K_SEATS, seat), seat)
  if counters(from, 'free') == 1 then restocked() end
  redis.call('HDEL', K_EVENT, unpack(BLOCK_HINTS))  -- a block may be back
end

-- Move every seat owned by hold h to owner state H, B or S, or back on sale (nil). Every seat
-- is checked before any is moved, and a party's seats move in one command of each kind.
local function seat_move(h, to)
  if is_stock(h) then return stock_move(h, to) end
  local seats = seats_of(h)
  if #seats <= 1 then
    if seats[1] then one_seat_move(h, seats[1], to) end
    return
  end
  local owners, from, seen = redis.call('HMGET', K_OWNERS, unpack(seats)), {}, {}
  for i, seat in ipairs(seats) do
    local cur = owners[i]
    if (not cur) or string.sub(cur, 3) ~= h.id or seen[seat] then
      error({ err = 'INVARIANT seat ' .. seat .. ' not owned once by hold ' .. h.id })
    end
    local state = string.sub(cur, 1, 1)  -- the same for every seat of a hold, counted apart
    from[state], seen[seat] = (from[state] or 0) + 1, true
  end
  if to then
    owners_set(seats, to .. ':' .. h.id)
    for state, n in pairs(from) do counters(OWNER_COUNTER[state], OWNER_COUNTER[to], n) end
    return
  end
  redis.call('HDEL', K_OWNERS, unpack(seats))
  local ranks, args = redis.call('ZMSCORE', K_SEATS, unpack(seats)), {}
  for i, seat in ipairs(seats) do args[2 * i - 1], args[2 * i] = ranks[i], seat end
  redis.call('ZADD', K_FREE, unpack(args))
  local free
  for state, n in pairs(from) do free = counters(OWNER_COUNTER[state], 'free', n) end
  if free == #seats then restocked() end  -- none was free before
  redis.call('HDEL', K_EVENT, unpack(BLOCK_HINTS))  -- a block may be back
end

local function drop_login(h)
  if redis.call('HGET', K_LOGINS, h.login) == h.id then redis.call('HDEL', K_LOGINS, h.login) end
end

-- A charge that must never win: if it is ever captured it is refunded.
local function mark_refund_only(ctx, charge_id, reason)
  if charge_id == nil or charge_id == '' then return end
  local c = get_charge(charge_id)
  if c and c.refund_only == 0 then
    c.refund_only = 1
    c.reason = reason
    put_charge(c)
    emit(ctx, 'charge', c.id, c.state, 'REFUND_ONLY', 0, nil, c, reason)
  end
end

-- Seats a login bought in this event (CONFIRMED holds, less those revoked): the claim's
-- per-login cap counts them (lua/hold_claim.lua).
local function count_bought(login, delta)
  redis.call('HINCRBY', K_QUOTA, 'bought:' .. login, delta)
end

-- Presale access codes (ADR 0049) in the event's codes hash (K_CODES): 'p:<presale>' a window
-- ({opens_at_ms, closes_at_ms}), 'c:<code>' a code ({presale, uses, per_login, expires_ms}),
-- 'u:<code>' its uses spent and 'l:<code>:<login>' a login's: one per hold claimed with it in a
-- presale, live or sold. A hold that ends without a sale gives its use back; a sale keeps it.
local function code_give_back(h)
  redis.call('HINCRBY', K_CODES, 'u:' .. h.code, -1)
  redis.call('HINCRBY', K_CODES, 'l:' .. h.code .. ':' .. h.login, -1)
end

-- When a presale window is open now: {windows = {name -> {opens_at_ms, closes_at_ms}}, closes
-- = when the latest of those open now closes}; nil else.
local function presale_open(ctx)
  local raw = redis.call('HGET', K_CODES, 'presales')
  if not raw then return nil end
  local windows, closes = cjson.decode(raw), nil
  for _, w in pairs(windows) do
    if w[1] <= ctx.now and ctx.now < w[2] then closes = math.max(closes or 0, w[2]) end
  end
  if not closes then return nil end
  return { windows = windows, closes = closes }  -- `closes`: the latest open window's end
end

-- The code a presale claim may spend, or nil and the refusal. `prev`: the login's hold this
-- claim replaces; its use of the same code is given back in the same step.
local function code_to_spend(ctx, presale, code, login, prev)
  if code == '' then return nil, { 'CODE_REQUIRED', presale.closes } end
  local raw = redis.call('HGET', K_CODES, 'c:' .. code)
  if not raw then return nil, { 'CODE_INVALID' } end
  local c = cjson.decode(raw)
  local w = presale.windows[c.presale]
  if not w or ctx.now < w[1] or ctx.now >= w[2] or ctx.now >= c.expires_ms then
    return nil, { 'CODE_INVALID' }
  end
  local again = (prev and prev.code == code) and 1 or 0
  local v = redis.call('HMGET', K_CODES, 'u:' .. code, 'l:' .. code .. ':' .. login)
  if (tonumber(v[1]) or 0) - again >= c.uses then return nil, { 'CODE_USED_UP', c.uses } end
  if c.per_login > 0 and (tonumber(v[2]) or 0) - again >= c.per_login then
    return nil, { 'CODE_LIMIT', c.per_login }
  end
  return code
end

local function hold_end(ctx, h, to, reason)
  local from = h.state
  if to == CONFIRMED then count_bought(h.login, units_of(h)) end
  hold_move(h, to)
  h.decided_ms = ctx.now
  h.reason = reason
  redis.call('ZREM', K_DEADLINES, h.id)
  redis.call('ZREM', K_QUARANTINES, h.id)
  drop_login(h)
  if h.code then  -- the ledger keeps which code a hold spent (presale_code_uses)
    if to ~= CONFIRMED then code_give_back(h) end
    ctx.extra = { 'code', h.code }
  end
  local record = emit(ctx, 'hold', h.id, from, to, 1, h, nil, reason)
  -- A hold that ends RELEASED or EXPIRED without ever having had a charge can be named again
  -- only by a replayed claim: it is indexed with the outbox id of its decision, and
  -- lua/hold_trim.lua drops it once the ledger holds that record and the retention passed
  -- (ADR 0018). A hold money ever touched is never indexed: late callbacks must find it.
  if (to == RELEASED or to == EXPIRED) and h.charges == '' and h.blocking == '' then
    h.record = record
    redis.call('ZADD', K_ENDED, ctx.now, h.id)
    index_by(K_TRIMS, ctx.now)
  end
  put_hold(h)
end

-- After the sale: the winning money of a CONFIRMED hold moved at the provider. EXCEPTION keeps
-- the seat assigned (SOLD) for an operator; REVOKED puts it back on sale; CONFIRMED again when
-- a dispute is won. Non-terminal records (the CONFIRMED terminal record stays the decision).
-- A part of charge c's money given back (ADR 0043): a charge of its own, REFUNDING for
-- `amount` on c's provider attempt and key, naming the goods it paid for (`seat`) and its
-- parent (`part_of`); c counts it in `parted`, so what c still holds is its capture less its
-- parts. The refund worker asks the provider for exactly `amount`, idempotent by part_id.
-- A part of no money (seats that cost nothing) has nothing to give back: it is REFUNDED at once.
local function part_refund(ctx, c, part_id, goods, amount, reason)
  local p = { id = part_id, key = c.key or c.id, hold = c.hold, seat = goods, login = c.login,
    state = amount > 0 and REFUNDING or REFUNDED, attempt = c.attempt, intent = c.intent,
    refund_only = 0, amount = amount, captured = amount, created_ms = ctx.now,
    decided_ms = ctx.now, refund_attempts = 0, reason = reason, final = 0, part_of = c.id }
  if p.state == REFUNDING then refund_due(ctx.now, part_id) end
  local h = get_hold(c.hold)  -- listed with the hold's charges: its views show the part
  if h then
    h.charges = h.charges == '' and part_id or h.charges .. ',' .. part_id
    put_hold(h)
  end
  c.parted = (c.parted or 0) + amount
  c.parts = c.parts or {}
  c.parts[part_id] = 1  -- its ids: the part itself knows its goods and amount
  put_charge(c)
  charge_record(ctx, p, '', nil, reason)
  return p
end

-- What charge c's parts already gave back at the provider (their refunds recorded).
local function parts_back(c)
  local back = 0
  for part_id, _ in pairs(c.parts or {}) do
    local p = get_charge(part_id)
    if p and p.state == REFUNDED then back = back + p.amount end
  end
  return back
end

-- The provider gave back all of charge c's money: any part still on its way back is back too
-- (nothing is left to refund, and a refund request would be refused).
local function parts_refunded(ctx, c, reason)
  for part_id, _ in pairs(c.parts or {}) do
    local p = get_charge(part_id)
    if p and p.state == REFUNDING then
      charge_move(p, REFUNDED)
      p.decided_ms = ctx.now
      redis.call('ZREM', K_REFUNDS, p.id)
      charge_record(ctx, p, REFUNDING, nil, reason)
    end
  end
end

-- A hold's seats back on sale while its winner's money only partly left at the provider (its
-- own partial refund, `moved`): the rest is given back too, never kept without a seat.
local function give_back_rest(ctx, h)
  local c = h.winner ~= '' and get_charge(h.winner) or nil
  if not c or c.state ~= PROVIDER_REFUNDED or (c.moved or 0) == 0 then return end
  local rest = money_captured(c) - (c.parted or 0) - c.moved  -- parts pending go on their own
  if rest > 0 then
    part_refund(ctx, c, c.id .. ':r000000000000', h.seat, rest, 'rest_of_partial_refund')
  end
end

local function hold_after_sale(ctx, h, to, reason, suffix)
  local from = h.state
  if to == REVOKED then
    seat_move(h, nil)
    count_bought(h.login, -units_of(h))
    give_back_rest(ctx, h)
  end
  hold_move(h, to)
  h.reason = reason
  put_hold(h)
  emit(ctx, 'hold', h.id, from, to, 0, h, nil, reason, suffix)
end

-- Deadline policies (ADR 0020): `quarantine`, `release_refund`, or `grace:<ms>` (a charge in
-- flight at the deadline keeps its hold live <ms> more, then release-and-refund; the bounds are
-- engine/model/states.py GRACE_MS_MIN and GRACE_MS_MAX). nil for any other name.
local function policy_spec(name)
  if name == 'quarantine' or name == 'release_refund' then return { late = name, grace_ms = 0 } end
  local ms = tonumber(string.match(name or '', '^grace:([1-9]%d*)$'))
  if ms and ms >= 1000 and ms <= 600000 then return { late = 'release_refund', grace_ms = ms } end
  return nil
end

-- What a policy decides for hold h, RESERVED and past its deadline at ctx.now: the `to` of
-- the deadline record (GRACE: kept live for its charge in flight).
local function deadline_to(ctx, late, grace_ms, h)
  if h.charge == '' then return EXPIRED end
  if ctx.now < h.expires_ms + grace_ms then return 'GRACE' end
  return late == 'quarantine' and QUARANTINED or EXPIRED
end

-- The shadow candidate's classification of the same deadline decision (nil: no shadow). It acts
-- on nothing: the record of the real decision carries it as `shadow_outcome`.
local function shadow_deadline(ctx, h)
  local spec = policy_spec(ctx.cfg.shadow_policy)
  return spec and deadline_to(ctx, spec.late, spec.grace_ms, h) or nil
end

-- The shadow candidate's view of a capture of charge c arriving past its hold's deadline
-- (CAPTURED: it would have won; REFUNDING), nil when no shadow runs or the capture is not late.
-- A capture that loses for a reason no deadline policy changes (a winner already, the hold
-- given up or released, the charge abandoned) loses under any candidate.
local DEADLINE_REASONS = { deadline_release_and_refund = true, quarantine_timeout = true,
  deadline_grace_ended = true }
local function shadow_capture(ctx, h, c)
  local spec = policy_spec(ctx.cfg.shadow_policy)
  if not spec or not h or ctx.now < h.expires_ms then return nil end
  if h.winner ~= '' or (h.given_up or 0) == 1 or h.state == RELEASED
      or (c.refund_only == 1 and not DEADLINE_REASONS[c.reason]) then
    return REFUNDING
  end
  local late_ms = ctx.now - h.expires_ms
  if late_ms < spec.grace_ms or (spec.late == 'quarantine' and late_ms < ctx.cfg.quarantine_ms) then
    return CAPTURED
  end
  return REFUNDING
end

-- Inside the enforced policy's grace: the hold stays live for its charge in flight and the
-- deadline index moves to the grace's end, where the sweeper looks again. One record per grace
-- (an index already at that end means it was recorded).
local function hold_grace(ctx, h, shadow)
  local until_ms = h.expires_ms + ctx.cfg.grace_ms
  if (tonumber(redis.call('ZSCORE', K_DEADLINES, h.id)) or 0) >= until_ms then return end
  redis.call('ZADD', K_DEADLINES, until_ms, h.id)
  due_by(ctx, until_ms)
  ctx.shadow_outcome = shadow
  emit(ctx, 'hold', h.id, RESERVED, 'GRACE', 0, h, nil, 'deadline_charge_in_flight',
    string.format('%d', until_ms))
end

-- The deadline rule, the one place it is written. Live while now < expires_ms. Applied by the
-- sweeper and by every path that touches a hold (callbacks, claims, releases), so whichever
-- script runs first after the deadline makes the one transition and the others see its result.
-- The enforced policy decides; a shadow candidate only classifies (ADR 0020).
local function settle(ctx, h)
  if h.state == RESERVED and ctx.now >= h.expires_ms then
    local to = deadline_to(ctx, ctx.cfg.policy, ctx.cfg.grace_ms, h)
    local shadow = shadow_deadline(ctx, h)
    if to == 'GRACE' then
      hold_grace(ctx, h, shadow)
    elseif to == QUARANTINED then
      hold_move(h, QUARANTINED)
      h.until_ms = h.expires_ms + ctx.cfg.quarantine_ms
      seat_move(h, 'B')
      redis.call('ZREM', K_DEADLINES, h.id)
      redis.call('ZADD', K_QUARANTINES, h.until_ms, h.id)
      due_by(ctx, h.until_ms)
      put_hold(h)
      ctx.shadow_outcome = shadow
      emit(ctx, 'hold', h.id, RESERVED, QUARANTINED, 0, h, nil, 'deadline_charge_in_flight')
    else
      local reason = 'deadline'
      if h.charge ~= '' then
        reason = ctx.cfg.grace_ms > 0 and 'deadline_grace_ended' or 'deadline_release_and_refund'
        mark_refund_only(ctx, h.charge, reason)
        h.charge = ''
      end
      seat_move(h, nil)
      ctx.shadow_outcome = shadow
      hold_end(ctx, h, EXPIRED, reason)
    end
  end
  if h.state == QUARANTINED and ctx.now >= h.until_ms then
    mark_refund_only(ctx, h.charge, 'quarantine_timeout')
    h.charge = ''
    seat_move(h, nil)
    hold_end(ctx, h, EXPIRED, 'quarantine_timeout')
  end
  if h.state == RELEASED and h.blocking ~= '' and ctx.now >= h.until_ms then
    seat_move(h, nil)
    h.blocking = ''
    redis.call('ZREM', K_QUARANTINES, h.id)
    put_hold(h)
    emit(ctx, 'hold', h.id, RELEASED, 'SEAT_FREED', 0, h, nil, 'quarantine_timeout')
  end
end

-- A charge of hold h reached DECLINED, FAILED or REFUNDING: the hold stops waiting for it.
local function charge_resolved(ctx, h, c, reason)
  if h.charge == c.id then
    h.charge = ''
    if h.state == QUARANTINED then
      seat_move(h, nil)
      hold_end(ctx, h, EXPIRED, reason)
      return
    end
    put_hold(h)
  end
  if h.state == RELEASED and h.blocking == c.id then
    seat_move(h, nil)
    h.blocking = ''
    redis.call('ZREM', K_QUARANTINES, h.id)
    put_hold(h)
    emit(ctx, 'hold', h.id, RELEASED, 'SEAT_FREED', 0, h, nil, reason)
  end
end

-- A sale an operator ended (lua/event_close.lua, lua/event_cancel.lua): no new claim or charge
-- start, but every provider message about money already asked for is still decided.
local SALE_ENDED = { closed = true, cancelled = true }
local function deciding(cfg)
  return cfg.status == 'open' or SALE_ENDED[cfg.status] == true
end

local function context()
  local cfg = config()
  if not cfg then return nil end
  return { cfg = cfg, now = now_ms() }
end

-- A per-login token bucket in the quota hash ('tokens|stamp_ms' under `field`): refills
-- `per_s` tokens a second up to `burst`; each call spends one. Returns 0 when allowed, else the
-- ms until a token is back (nothing spent). per_s 0: no limit.
local function take_token(ctx, field, per_s, burst)
  if per_s <= 0 then return 0 end
  local tokens, stamp = burst, ctx.now
  local raw = redis.call('HGET', K_QUOTA, field)
  if raw then
    local sep = string.find(raw, '|', 1, true)
    tokens = tonumber(string.sub(raw, 1, sep - 1))
    stamp = tonumber(string.sub(raw, sep + 1))
    tokens = math.min(burst, tokens + math.max(0, ctx.now - stamp) * per_s / 1000)
  end
  if tokens < 1 then return math.ceil((1 - tokens) * 1000 / per_s) end
  redis.call('HSET', K_QUOTA, field, string.format('%.3f|%.0f', tokens - 1, ctx.now))
  return 0
end

-- A sweeper's step (hold_expire, hold_quarantine_timeout): settle the holds of `index` due by
-- now, at most `batch_max` of them; `tally(was, h)` says which of the two counts a hold adds to (1
-- or 2, nil: neither). Returns SWEPT examined count1 count2 remaining_due, or NOT_FOUND.
local function settle_due(batch_max, index, what, tally)
  local ctx = context()
  if not ctx then return { 'NOT_FOUND' } end
  local batch = tonumber(batch_max)
  if not batch or batch < 1 then return redis.error_reply('BAD_ARGS batch_max') end
  local due = redis.call('ZRANGEBYSCORE', index, '-inf', ctx.now, 'LIMIT', 0, batch)
  local counts = { 0, 0 }
  for _, hold_id in ipairs(due) do
    local h = get_hold(hold_id)
    if not h then
      error({ err = 'INVARIANT ' .. what .. ' for unknown hold ' .. hold_id })
    end
    local was = h.state
    settle(ctx, h)
    local n = tally(was, h)
    if n then counts[n] = counts[n] + 1 end
  end
  due_again(ctx)
  local remaining = redis.call('ZCOUNT', index, '-inf', ctx.now)
  return { 'SWEPT', #due, counts[1], counts[2], remaining }
end
