--[[ event_cancel: cancel an event: closed, every sold seat's captured money refunded, every hold ended.
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[1] actor (who cancelled it, for the record)   ARGV[2] holds examined at most in this call
Returns {code, ...}: CANCELLING done remaining | CANCELLED done remaining | FENCED | NOT_FOUND;
  done: holds this call moved; remaining: units (seats) still held, blocked or sold
Invariants: the first call sets status cancelled (no claim or charge start from then on) and
records it once (kind event, EVENT_CANCELLED); each call examines at most ARGV[2] holds (HSCAN,
its cursor kept in the event hash) and moves each one once, by the deadline rule first: RESERVED
-> RELEASED and QUARANTINED -> EXPIRED (a charge in flight marked resolve-by-refund), a released
hold's blocked seat freed, CONFIRMED and EXCEPTION -> REVOKED with a CAPTURED winner going
REFUNDING onto the refund queue; every move is recorded in the outbox and seats go back to FREE.
Repeats are idempotent: once nothing is held, blocked or sold, a call changes nothing. ]]
local ctx = context()
if not ctx then return { 'NOT_FOUND' } end
local status = ctx.cfg.status
if status == 'fenced' then return { 'FENCED' } end
local budget = tonumber(ARGV[2])
if not budget or budget < 1 then return redis.error_reply('BAD_ARGS holds per call') end
local REASON = 'event_cancelled'

local function remaining()
  local v = redis.call('HMGET', K_EVENT, 'held', 'blocked', 'sold')
  return (tonumber(v[1]) or 0) + (tonumber(v[2]) or 0) + (tonumber(v[3]) or 0)
end

-- The winner of a sold hold: its captured money goes back to the buyer.
local function refund_winner(h)
  local c = h.winner ~= '' and get_charge(h.winner) or nil
  if not c or c.state ~= CAPTURED then return end
  if (tonumber(c.captured) or 0) == 0 then c.captured = c.amount end
  charge_move(c, REFUNDING)
  c.refund_only = 1
  c.reason = REASON
  c.decided_ms = ctx.now
  refund_due(ctx.now, c.id)
  charge_record(ctx, c, CAPTURED, h, REASON, 'cancel')
end

-- One hold: true when it moved.
local function cancel_hold(h)
  settle(ctx, h)
  if h.state == RESERVED or h.state == QUARANTINED then
    local to = h.state == RESERVED and RELEASED or EXPIRED
    mark_refund_only(ctx, h.charge, REASON)
    h.charge = ''
    seat_move(h, nil)
    hold_end(ctx, h, to, REASON)
  elseif h.state == RELEASED and h.blocking ~= '' then
    seat_move(h, nil)
    h.blocking = ''
    redis.call('ZREM', K_QUARANTINES, h.id)
    put_hold(h)
    emit(ctx, 'hold', h.id, RELEASED, 'SEAT_FREED', 0, h, nil, REASON)
  elseif h.state == CONFIRMED or h.state == EXCEPTION then
    if h.state == CONFIRMED then refund_winner(h) end
    hold_after_sale(ctx, h, REVOKED, REASON, 'cancel')
  else
    return false
  end
  return true
end

if status ~= 'cancelled' then
  redis.call('HSET', K_EVENT, 'status', 'cancelled', 'cancelled_at_ms', ctx.now, 'cancel_cursor', '0')
  emit(ctx, 'event', ctx.cfg.id, status, 'EVENT_CANCELLED', 0, nil, nil, 'cancelled_by:' .. ARGV[1])
end
if remaining() == 0 then return { 'CANCELLED', 0, 0 } end
local cursor = redis.call('HGET', K_EVENT, 'cancel_cursor') or '0'
local examined, done = 0, 0
repeat
  local page = redis.call('HSCAN', K_HOLDS, cursor, 'COUNT', budget - examined)
  cursor = page[1]
  for i = 1, #page[2], 2 do
    local id = page[2][i]
    if HOLDS[id] == nil then HOLDS[id] = hold_of(page[2][i + 1]) end
    local h = HOLDS[id]
    if h and cancel_hold(h) then done = done + 1 end
    examined = examined + 1
  end
until cursor == '0' or examined >= budget
redis.call('HSET', K_EVENT, 'cancel_cursor', cursor)
local left = remaining()
if left == 0 then return { 'CANCELLED', done, 0 } end
return { 'CANCELLING', done, left }
