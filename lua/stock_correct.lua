--[[ stock_correct: set or adjust the on-hand count of one SKU at one location (a warehouse count).
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[1] correction_id (idempotency key)   ARGV[2] sku   ARGV[3] location
ARGV[4] mode: 'set' (on hand becomes ARGV[5]) or 'adjust' (on hand changes by ARGV[5], signed)
ARGV[5] integer   ARGV[6] reason   ARGV[7] operator
Returns {code, ...}: APPLIED on_hand available | REPLAY on_hand available (the correction was
  applied before: the on hand it left, the available now) | BELOW_ZERO available held blocked sold (it
  would take available below zero: nothing written) | CORRECTION_ID_REUSED (the id was applied
  with another body) | UNKNOWN_SKU sku | UNKNOWN_LOCATION location | WRONG_KIND kind |
  NOT_OPEN status | NOT_FOUND
Invariants: available + held + blocked + sold = on_hand before and after; a correction never
takes a unit a hold has (held, blocked) or a sale has (sold): on hand never goes below what
they own; one correction id is applied at most once, with exactly one outbox record (kind
`correction`, from/to = on hand before/after, with its mode and value), written to the
ledger's stock_corrections. ]]
local id, sku, loc, mode = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local value = tonumber(ARGV[5])
if id == '' or (mode ~= 'set' and mode ~= 'adjust') or not value or value ~= math.floor(value) then
  return redis.error_reply('BAD_ARGS correction id, mode and integer value')
end
local ctx = context()
if not ctx then return { 'NOT_FOUND' } end
if ctx.cfg.kind ~= 'stock' then return { 'WRONG_KIND', ctx.cfg.kind } end
-- The value as a plain integer ('+4' and '4' are one body): the ledger stores it as a number.
local body = table.concat({ sku, loc, mode, string.format('%d', value), ARGV[6], ARGV[7] }, '\0')
local done = redis.call('HGET', K_CORRECTIONS, id)
if done then
  local d = cjson.decode(done)
  if d.body ~= body then return { 'CORRECTION_ID_REUSED' } end
  return { 'REPLAY', d.after, stock_get(sku, loc, 'available') }
end
if ctx.cfg.status ~= 'open' and ctx.cfg.status ~= 'draft' then
  return { 'NOT_OPEN', ctx.cfg.status }
end
if not redis.call('HGET', K_STOCK, sku .. ':price') then return { 'UNKNOWN_SKU', sku } end
if not redis.call('HGET', K_STOCK, sku .. '@' .. loc .. ':on_hand') then
  return { 'UNKNOWN_LOCATION', loc }
end
local before = stock_get(sku, loc, 'on_hand')
local after = mode == 'set' and value or before + value
local available = stock_get(sku, loc, 'available') + (after - before)
if available < 0 then
  return { 'BELOW_ZERO', stock_get(sku, loc, 'available'), stock_get(sku, loc, 'held'),
    stock_get(sku, loc, 'blocked'), stock_get(sku, loc, 'sold') }
end
local delta = after - before
stock_add(sku, loc, 'on_hand', delta)
stock_add(sku, loc, 'available', delta)
redis.call('HINCRBY', K_EVENT, 'seats_total', delta)
local free = redis.call('HINCRBY', K_EVENT, 'free', delta)
if delta > 0 and free == delta then restocked() end
redis.call('HSET', K_CORRECTIONS, id, cjson.encode({ body = body, before = before, after = after,
  at_ms = ctx.now }))
ctx.extra = { 'mode', mode, 'value', string.format('%d', value) }
emit(ctx, 'correction', id, tostring(before), tostring(after), 1,
  { id = '', seat = sku .. '@' .. loc, login = ARGV[7], winner = '' }, nil, ARGV[6])
return { 'APPLIED', after, available }
