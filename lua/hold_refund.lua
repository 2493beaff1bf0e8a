--[[ hold_refund: an operator gives back part of a confirmed order (some seats of a party, some units of a cart) or all of it, for a reason.
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[1] hold_id   ARGV[2] part_id (the part's charge id: '<winner>:r<12 hex>', from the
request's Idempotency-Key)   ARGV[3] goods: seat ids, or stock lines '<sku>@<location>*<qty>',
comma-separated, each at most once   ARGV[4] what the seats cost (minor units, their prices;
ignored for stock: the lines' SKU prices)   ARGV[5] reason (for the record)
Returns {code, ...}: PART part_id amount kept_goods | WHOLE charge_id amount |
  REPLAY part_id amount whole(1|0) | IDEMPOTENCY_KEY_REUSED first_goods | NOT_CONFIRMED state |
  NOT_IN_ORDER item | RECOVERING (the event is fenced or being rebuilt) | NOT_FOUND
Invariants: only a CONFIRMED hold whose winner is CAPTURED gives money back; the money given
back is exactly the named goods' price (never more than the charge still holds); those goods go
back on sale in this same step and leave the hold (its `seat`, a cart's `amount`, the login's
bought count) while the rest stays sold; a part is a charge of its own, REFUNDING on the refund
queue for its amount (lua/_lib.lua part_refund); naming every remaining item gives the whole
rest back: the winner goes REFUNDING and the hold REVOKED; one part per part_id: the same id
again answers REPLAY, with other goods IDEMPOTENCY_KEY_REUSED (the part itself is looked up, so
this holds after a rebuild too); goods of the other kind (lines for seats) are not in the
order; nothing is decided on a fenced or rebuilding event; every change is recorded in the
outbox (the part's charge record, and the hold's with its remaining goods). ]]
local hold_id, part_id, goods, reason = ARGV[1], ARGV[2], ARGV[3], ARGV[5]
if part_id == '' or goods == '' or reason == '' then
  return redis.error_reply('BAD_ARGS part id, goods and reason')
end
local ctx = context()
if not ctx then return { 'NOT_FOUND' } end
if not deciding(ctx.cfg) then return { 'RECOVERING' } end  -- fenced, or being rebuilt
local h = get_hold(hold_id)
if not h then return { 'NOT_FOUND' } end
local c = h.winner ~= '' and get_charge(h.winner) or nil
-- The same key again: its part (kept through a rebuild), or the whole rest it gave back.
local part, whole = get_charge(part_id), c and c.whole
if part then
  if part.seat ~= goods then return { 'IDEMPOTENCY_KEY_REUSED', part.seat } end
  return { 'REPLAY', part_id, part.amount, 0 }
elseif whole and whole.key == part_id then
  if whole.goods ~= goods then return { 'IDEMPOTENCY_KEY_REUSED', whole.goods } end
  return { 'REPLAY', c.id, money_captured(c) - (c.parted or 0), 1 }
end
if h.state ~= CONFIRMED or not c or c.state ~= CAPTURED then return { 'NOT_CONFIRMED', h.state } end
-- Goods of the order's kind: seat ids for seats, '<sku>@<location>*<qty>' lines for a cart.
if is_stock(h) ~= is_stock({ seat = goods }) or (is_stock(h) and #lines_of(goods) == 0) then
  return { 'NOT_IN_ORDER', goods }
end

-- The goods asked for, checked against the hold's: what stays, and what they cost.
local kept, amount = {}, 0
if is_stock(h) then
  local asked, price = {}, {}
  for _, line in ipairs(lines_of(goods)) do
    local at = line.sku .. '@' .. line.loc
    if asked[at] or line.qty < 1 then return redis.error_reply('BAD_ARGS line ' .. at) end
    asked[at] = line.qty
    price[at] = tonumber(redis.call('HGET', K_STOCK, line.sku .. ':price') or 0)
  end
  for _, line in ipairs(lines_of(h.seat)) do
    local at = line.sku .. '@' .. line.loc
    local qty = asked[at] or 0
    if qty > line.qty then return { 'NOT_IN_ORDER', at } end
    if asked[at] then amount = amount + qty * price[at] end
    asked[at] = nil
    if line.qty > qty then
      kept[#kept + 1] = string.format('%s@%s*%d', line.sku, line.loc, line.qty - qty)
    end
  end
  local stray = next(asked)
  if stray then return { 'NOT_IN_ORDER', stray } end
else
  local asked, n = {}, 0
  for _, seat in ipairs(seats_of({ seat = goods })) do
    if asked[seat] then return redis.error_reply('BAD_ARGS seat ' .. seat .. ' twice') end
    asked[seat], n = true, n + 1
  end
  for _, seat in ipairs(seats_of(h)) do
    if asked[seat] then asked[seat], n = nil, n - 1 else kept[#kept + 1] = seat end
  end
  if n > 0 then return { 'NOT_IN_ORDER', next(asked) } end
  amount = tonumber(ARGV[4])
  if not amount or amount < 0 or amount ~= math.floor(amount) then
    return redis.error_reply('BAD_ARGS amount')
  end
end
local left = money_captured(c) - (c.parted or 0)
local why = 'operator_refund:' .. reason

if #kept == 0 then
  -- Everything left: the rest of the charge's money goes back and the seats go back on sale.
  c.whole = { key = part_id, goods = goods }  -- its amount: the capture less the parts
  charge_move(c, REFUNDING)
  c.decided_ms = ctx.now
  c.reason = why
  refund_due(ctx.now, c.id)
  charge_record(ctx, c, CAPTURED, h, why)
  hold_after_sale(ctx, h, REVOKED, why, part_id)
  return { 'WHOLE', c.id, left }
end
if amount > left then
  error({ err = 'INVARIANT part of ' .. amount .. ' exceeds the ' .. left .. ' charge ' .. c.id .. ' holds' })
end
part_refund(ctx, c, part_id, goods, amount, why)
-- The part's goods back on sale, as a hold of their own would move them; the hold keeps the rest.
local n = units_of({ seat = goods })
seat_move({ id = h.id, seat = goods, bucket = h.bucket }, nil)
count_bought(h.login, -n)
h.seat = table.concat(kept, ',')
if is_stock(h) then h.amount = (h.amount or 0) - amount end
put_hold(h)
emit(ctx, 'hold', h.id, CONFIRMED, CONFIRMED, 0, h, nil, why, part_id)
return { 'PART', part_id, amount, h.seat }
