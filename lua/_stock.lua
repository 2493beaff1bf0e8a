--[[ _stock: quantity stock, in the library after _lib.lua (ADR 0022).
A stock event sells counted units of SKUs kept at locations (warehouses). Per sku and location
the stock hash (KEYS[20]) keeps five counters, '<sku>@<location>:on_hand', ':available',
':held', ':blocked' and ':sold', with available + held + blocked + sold = on_hand; the event's
own counters (free, held, blocked, sold, seats_total) are their sums over every line.
A stock hold's `seat` lists its lines '<sku>@<location>*<qty>', comma-separated, and its
`bucket` says where its units are (H held, B blocked, S sold, '' given back): the transitions
of _lib.lua move a stock hold's units with stock_move exactly where they move a party's seats,
so every automaton and the deadline rule are the same for both. ]]

local STOCK_COUNTER = { H = 'held', B = 'blocked', S = 'sold' }

-- The lines of a `seat` list: { {sku, loc, qty} ... } (nil entries never: the format is ours).
local function lines_of(listed)
  local out = {}
  for sku, loc, qty in string.gmatch(listed, '([^,@*]+)@([^,@*]+)%*(%d+)') do
    out[#out + 1] = { sku = sku, loc = loc, qty = tonumber(qty) }
  end
  return out
end

stock_units = function(listed)
  local n = 0
  for _, line in ipairs(lines_of(listed)) do n = n + line.qty end
  return n
end

local function stock_get(sku, loc, counter)
  return tonumber(redis.call('HGET', K_STOCK, sku .. '@' .. loc .. ':' .. counter) or 0)
end

local function stock_add(sku, loc, counter, n)
  return redis.call('HINCRBY', K_STOCK, sku .. '@' .. loc .. ':' .. counter, n)
end

-- Move every unit of stock hold h from its bucket to H, B or S, or back to available (nil).
stock_move = function(h, to)
  local from = h.bucket or ''
  if from == '' then
    error({ err = 'INVARIANT stock hold ' .. h.id .. ' owns no units to move' })
  end
  local n = 0
  for _, line in ipairs(lines_of(h.seat)) do
    if stock_add(line.sku, line.loc, STOCK_COUNTER[from], -line.qty) < 0 then
      error({ err = 'INVARIANT stock ' .. line.sku .. '@' .. line.loc .. ' below zero' })
    end
    stock_add(line.sku, line.loc, to and STOCK_COUNTER[to] or 'available', line.qty)
    n = n + line.qty
  end
  if to then
    counters(OWNER_COUNTER[from], OWNER_COUNTER[to], n)
  elseif counters(OWNER_COUNTER[from], 'free', n) == n then
    restocked()
  end
  h.bucket = to or ''
end

local function split(listed)
  local out = {}
  for item in string.gmatch(listed, '[^,]+') do out[#out + 1] = item end
  return out
end

-- The location a line is taken from (ADR 0022): the one asked for, or else the first of the
-- event's locations, in its preference order, with enough available for the whole line (a
-- line is never split across locations). `back`: units the claim gives back first (the login's
-- previous hold), counted as available. Returns loc, or nil and the most any location has.
local function stock_pick(ask, locations, back)
  local options = ask.loc ~= '' and { ask.loc } or locations
  local most = 0
  for _, loc in ipairs(options) do
    local have = stock_get(ask.sku, loc, 'available') + (back[ask.sku .. '@' .. loc] or 0)
    if have >= ask.qty then return loc end
    if have > most then most = have end
  end
  return nil, most
end

-- What a stock claim asks for: '+<sku>*<qty>[@<location>],...'. Returns the asked lines, or
-- nil and a refusal reply. Unknown skus and locations are refusals, not errors: a client sent
-- them.
local function stock_asked(want, cfg)
  local asked, seen, known_loc = {}, {}, {}
  for _, loc in ipairs(split(cfg.locations)) do known_loc[loc] = true end
  for _, item in ipairs(split(string.sub(want, 2))) do
    local sku, qty, loc = string.match(item, '^([^*@]+)%*(%d+)@?([^@*]*)$')
    qty = tonumber(qty)
    if not sku or not qty or qty < 1 or seen[sku] then
      return nil, redis.error_reply('BAD_ARGS stock line ' .. item)
    end
    seen[sku] = true
    if not redis.call('HGET', K_STOCK, sku .. ':price') then return nil, { 'UNKNOWN_SKU', sku } end
    if loc ~= '' and not known_loc[loc] then return nil, { 'UNKNOWN_LOCATION', loc } end
    asked[#asked + 1] = { sku = sku, qty = qty, loc = loc }
  end
  return asked
end

-- Check a stock claim can be served whole; returns the lines with their location and amount,
-- or nil and a refusal reply. Nothing is written.
local function stock_plan(want, cfg, prev)
  local asked, refused = stock_asked(want, cfg)
  if not asked then return nil, refused end
  local back = {}
  if prev and is_stock(prev) then
    for _, line in ipairs(lines_of(prev.seat)) do back[line.sku .. '@' .. line.loc] = line.qty end
  end
  local locations, amount = split(cfg.locations), 0
  for _, ask in ipairs(asked) do
    local loc, most = stock_pick(ask, locations, back)
    if not loc then return nil, { 'INSUFFICIENT_STOCK', ask.sku, most } end
    ask.loc = loc
    amount = amount + ask.qty * tonumber(redis.call('HGET', K_STOCK, ask.sku .. ':price'))
  end
  return asked, amount
end

-- Take the planned lines for hold h (checked by stock_plan, after the previous hold gave its
-- units back): available -> held. Returns the `seat` list.
local function stock_take(plan, h)
  local listed, n = {}, 0
  for _, line in ipairs(plan) do
    if stock_add(line.sku, line.loc, 'available', -line.qty) < 0 then
      error({ err = 'INVARIANT stock ' .. line.sku .. '@' .. line.loc .. ' checked but short' })
    end
    stock_add(line.sku, line.loc, 'held', line.qty)
    listed[#listed + 1] = string.format('%s@%s*%d', line.sku, line.loc, line.qty)
    n = n + line.qty
  end
  counters('free', 'held', n)
  h.bucket = 'H'
  return table.concat(listed, ',')
end
