--[[ stock_add: add SKUs (id, price) to a DRAFT stock event, every counter 0 at every location.
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[1..2n] sku, price (minor units) pairs, 1 <= n <= 1000
Returns {code, ...}: ADDED n | NOT_FOUND | NOT_DRAFT | WRONG_KIND kind (a seat event) |
  DUPLICATE_SKU sku
Invariants: SKUs are only added before the sale opens, a chunk whole or not at all; units come
in only through stock_correct (the initial count is a correction like any other, so the ledger
holds every unit's origin). ]]
local status = redis.call('HGET', K_EVENT, 'status')
if not status then return { 'NOT_FOUND' } end
if status ~= 'draft' then return { 'NOT_DRAFT' } end
if redis.call('HGET', K_EVENT, 'kind') ~= 'stock' then return { 'WRONG_KIND', 'seats' } end
local n = #ARGV / 2
if #ARGV % 2 ~= 0 or n < 1 or n > 1000 then
  return redis.error_reply('BAD_ARGS 1 to 1000 sku, price pairs expected')
end
local seen = {}
for i = 1, #ARGV, 2 do
  local sku, price = ARGV[i], tonumber(ARGV[i + 1])
  if not price or price < 0 or price ~= math.floor(price) then
    return redis.error_reply('BAD_ARGS price of ' .. sku)
  end
  if seen[sku] or redis.call('HEXISTS', K_STOCK, sku .. ':price') == 1 then
    return { 'DUPLICATE_SKU', sku }
  end
  seen[sku] = true
end
local locations = redis.call('HGET', K_EVENT, 'locations')
for i = 1, #ARGV, 2 do
  local sku = ARGV[i]
  redis.call('HSET', K_STOCK, sku .. ':price', ARGV[i + 1])
  for loc in string.gmatch(locations, '[^,]+') do
    for _, counter in ipairs({ 'on_hand', 'available', 'held', 'blocked', 'sold' }) do
      redis.call('HSET', K_STOCK, sku .. '@' .. loc .. ':' .. counter, 0)
    end
  end
end
return { 'ADDED', n }
