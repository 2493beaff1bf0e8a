--[[ hold_claim: claim specific seats if all are FREE, the best FREE seats (a party: one hold), or
lines of quantity stock (a cart: one hold).
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[1] hold_id (the idempotency key)   ARGV[2] login   ARGV[3] what is asked for: '' the best
  free seat (ZPOPMIN, O(log n)); '#<n>' n seats, the best block of adjacent ones (consecutive
  ranks in one section) or else the n best (reads every free seat: O(free)); 's1,s2,...'
  those seats, all or nothing; '+<sku>*<qty>[@<location>],...' stock lines, all or nothing,
  each from the location asked for or the first of the event's locations that has enough
ARGV[4] claims per second per login (0: no limit)   ARGV[5] burst   ARGV[6] units a login may
  hold and buy in the event (0: no cap; the event's own `login_cap`, when set, wins)   ARGV[7] idempotency window ms: 0 uses ARGV[1] as the
  hold id; otherwise the hold id is ARGV[1] .. ':' .. the window number of now, and a replay is
  looked for in this window and the one before (ended holds are trimmed no sooner than one
  window after they ended, so an id is never used twice: ADR 0018)
ARGV[8] the hold record's form: 'full' stores every field, empty ones too, as versions before
  ADR 0034 read it (a rolling upgrade from one); anything else only the fields the claim set
ARGV[9] a presale access code ('' none; read only before T0, in a presale window: ADR 0049)
Returns {code, ...}: OK hold_id seats (comma-separated) expires_ms replaced_hold_id ('' if none)
  amount (a cart's, 0 for seats) | REPLAY hold_id seat expires_ms state amount | SOLD_OUT restocks (times the event came back from sold
  out) | NOT_ENOUGH_SEATS free (a party larger than what is free, seats are still free) |
  PARTY_TOO_LARGE max_party (the event's, 1000 at most in any event) | SEAT_TAKEN | UNKNOWN_SEAT | NOT_OPEN opens_at_ms | NOT_FOUND |
  CHARGE_IN_FLIGHT previous_hold_id | IDEMPOTENCY_KEY_REUSED | RATE_LIMITED retry_after_ms |
  LIMIT_EXCEEDED cap | WRONG_KIND kind (seats asked of a stock event, or stock of a seat event) |
  UNKNOWN_SKU sku | UNKNOWN_LOCATION location | INSUFFICIENT_STOCK sku most_available |
  CLOSED status (the sale was closed or cancelled by an operator) | CODE_REQUIRED closes_at_ms
  (a presale is on: a claim needs one of its codes) | CODE_INVALID (no such code, or not now) |
  CODE_USED_UP uses | CODE_LIMIT per_login (this login used the code as often as it may)
Invariants: a seat leaves the free set at most once per claim; a party is claimed whole or not at
all; one active checkout per login:
the login's previous live hold is released in the same step, only when the new claim succeeds,
and never while a charge on it is in flight; a sold-out event leaves the previous hold as it is.
Every call, refused or not, spends one of the login's claim tokens (a flood is refused before
it reads anything else); a login holds and buys at most the cap of units (bought + the new
hold's units); a stock line never takes a location below zero; before T0 only a presale's code
lets a claim in, and a code is spent by at most `uses` holds live or sold (`per_login` by one
login), the previous hold's use given back in the same step. ]]
local hold_id, login, want = ARGV[1], ARGV[2], ARGV[3]
local per_s, burst, cap = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local window_ms = tonumber(ARGV[7])
if hold_id == '' or login == '' or not (per_s and burst and cap and window_ms) then
  return redis.error_reply('BAD_ARGS hold_id, login, limits and window')
end
local ctx = context()
if not ctx then return { 'NOT_FOUND' } end
local wait_ms = take_token(ctx, 'claim:' .. login, per_s, burst)
if wait_ms > 0 then return { 'RATE_LIMITED', wait_ms } end
local presale = nil  -- before T0: the presale windows, one of them open now (ADR 0049)
if ctx.cfg.status ~= 'open' or ctx.now < ctx.cfg.opens_at_ms then
  if SALE_ENDED[ctx.cfg.status] then return { 'CLOSED', ctx.cfg.status } end
  presale = ctx.cfg.status == 'open' and presale_open(ctx) or nil
  if not presale then return { 'NOT_OPEN', ctx.cfg.opens_at_ms } end
end

local existing
if window_ms > 0 then
  local base, window = hold_id, math.floor(ctx.now / window_ms)
  hold_id = string.format('%s:%.0f', base, window)
  existing = get_hold_either(hold_id, string.format('%s:%.0f', base, window - 1))
else
  existing = get_hold(hold_id)
end
if existing then
  if existing.login ~= login then return { 'IDEMPOTENCY_KEY_REUSED' } end
  settle(ctx, existing)
  return { 'REPLAY', existing.id, existing.seat, existing.expires_ms, existing.state,
    existing.amount or 0 }
end

-- The login's previous checkout: apply the deadline rule first, then decide if it can go.
local prev = nil
local prev_id = redis.call('HGET', K_LOGINS, login)
if prev_id then
  prev = get_hold(prev_id)
  settle(ctx, prev)
  if prev.state == QUARANTINED or (prev.state == RESERVED and prev.charge ~= '') then
    return { 'CHARGE_IN_FLIGHT', prev.id }
  end
  if prev.state ~= RESERVED then prev = nil end
end

-- Before T0, in a presale: a code of an open window, with a use left (the previous hold's use
-- counts as left: it comes back when that hold goes, in this same step).
local code = nil
if presale then
  local refused
  code, refused = code_to_spend(ctx, presale, ARGV[9] or '', login, prev)
  if not code then return refused end
end

-- What is asked for: specific seats (all or nothing), n seats (best block first), or stock lines.
local stock = string.sub(want, 1, 1) == '+'
if stock ~= (ctx.cfg.kind == 'stock') then return { 'WRONG_KIND', ctx.cfg.kind } end
local wanted, n, plan, amount = {}, 1, nil, nil
if stock then
  plan, amount = stock_plan(want, ctx.cfg, prev)
  if not plan then return amount end  -- the refusal
  n = 0
  for _, line in ipairs(plan) do n = n + line.qty end
elseif string.sub(want, 1, 1) == '#' then
  n = tonumber(string.sub(want, 2))
  if not n or n < 1 or n ~= math.floor(n) then return redis.error_reply('BAD_ARGS party size') end
elseif want ~= '' then
  for seat in string.gmatch(want, '[^,]+') do wanted[#wanted + 1] = seat end
  n = #wanted
end
if not stock then
  local max_party = ctx.cfg.max_party > 0 and math.min(ctx.cfg.max_party, HOLD_SEATS_MAX)
    or HOLD_SEATS_MAX
  if n > max_party then return { 'PARTY_TOO_LARGE', max_party } end
end

if ctx.cfg.login_cap then cap = ctx.cfg.login_cap end
if cap > 0 and tonumber(redis.call('HGET', K_QUOTA, 'bought:' .. login) or 0) + n > cap then
  return { 'LIMIT_EXCEEDED', cap }
end

-- Sold out: nothing is written, and the login keeps the hold it has. Trading it would only take
-- the same seats back with a fresh deadline, and announce a restock that is not one.
local function sold_out()
  return { 'SOLD_OUT', tonumber(redis.call('HGET', K_EVENT, 'restocks') or 0) }
end

-- Check the new claim can succeed before giving up the previous hold: a seat is available if
-- it is free or the previous hold's (given up in the same step).
local function available(seat)
  if redis.call('ZSCORE', K_FREE, seat) then return true end
  return prev ~= nil and redis.call('HGET', K_OWNERS, seat) == 'H:' .. prev.id
end
if #wanted > 0 then
  local seen = {}
  for _, seat in ipairs(wanted) do
    if seen[seat] then return redis.error_reply('BAD_ARGS seat asked twice ' .. seat) end
    seen[seat] = true
    if not redis.call('ZSCORE', K_SEATS, seat) then return { 'UNKNOWN_SEAT' } end
  end
  for _, seat in ipairs(wanted) do
    if not available(seat) then return { 'SEAT_TAKEN' } end
  end
elseif not stock and (n > 1 or prev) then  -- (one seat and no previous hold: ZPOPMIN says it)
  local free = redis.call('ZCARD', K_FREE)
  if free == 0 then return sold_out() end
  local can = free + (prev and units_of(prev) or 0)
  -- Seats are free, only not enough for this party: not SOLD_OUT, which API processes remember
  -- and would answer to single-seat claims that can still win.
  if can < n then return { 'NOT_ENOUGH_SEATS', can } end
end

if prev then
  seat_move(prev, nil)
  hold_end(ctx, prev, RELEASED, 'replaced_by_new_claim')
end

local h = setmetatable({ id = hold_id, login = login, state = RESERVED, created_ms = ctx.now,
  expires_ms = ctx.now + ctx.cfg.hold_ttl_ms }, HOLD_EMPTY)
if ARGV[8] == 'full' then
  for field, empty in pairs(HOLD_EMPTY.__index) do h[field] = empty end
end
local seat
if stock then
  seat = stock_take(plan, h)
  h.amount = amount
elseif #wanted > 0 then
  seats_take_specific(wanted, hold_id)
  seat = table.concat(wanted, ',')
elseif n == 1 then
  seat = seat_take_best(hold_id)
  if not seat then return sold_out() end  -- nothing was written: no previous hold here
else
  seat = table.concat(seats_take_best(n, hold_id), ',')
end

if code then
  redis.call('HINCRBY', K_CODES, 'u:' .. code, 1)
  redis.call('HINCRBY', K_CODES, 'l:' .. code .. ':' .. login, 1)
  h.code = code
end
h.seat = seat
put_hold(h)
redis.call('HSET', K_LOGINS, login, hold_id)
redis.call('ZADD', K_DEADLINES, h.expires_ms, hold_id)
due_by(ctx, h.expires_ms)
return { 'OK', hold_id, seat, h.expires_ms, prev and prev.id or '', h.amount or 0 }
