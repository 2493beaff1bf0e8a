--[[ hold_release: the owner gives a hold up; always accepted for the owner.
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[1] hold_id   ARGV[2] login
Returns {code, ...}: RELEASED state | ALREADY_TERMINAL state | NOT_OWNER | NOT_FOUND
Invariants: with no charge in flight the seat is FREE at once; with one in flight the hold is
RELEASED, the charge is marked resolve-by-refund and the seat stays BLOCKED until the charge
resolves or the quarantine hard timeout passes; a QUARANTINED hold keeps waiting for its charge,
which can no longer win. Terminal holds never change. ]]
local ctx = context()
if not ctx then return { 'NOT_FOUND' } end
local h = get_hold(ARGV[1])
if not h then return { 'NOT_FOUND' } end
if h.login ~= ARGV[2] then return { 'NOT_OWNER' } end
settle(ctx, h)
if h.state == RESERVED then
  if h.charge == '' then
    seat_move(h, nil)
  else
    mark_refund_only(ctx, h.charge, 'released_by_owner')
    seat_move(h, 'B')
    h.blocking = h.charge
    h.charge = ''
    h.until_ms = ctx.now + ctx.cfg.quarantine_ms
  end
  hold_end(ctx, h, RELEASED, 'released_by_owner')
  if h.blocking ~= '' then
    redis.call('ZADD', K_QUARANTINES, h.until_ms, h.id)
    due_by(ctx, h.until_ms)
  end
  return { 'RELEASED', h.state }
end
if h.state == QUARANTINED then
  -- The buyer gave it up: no capture may confirm it any more (not even a new attempt on an
  -- earlier charge of this hold); it ends EXPIRED when its money resolves or times out.
  mark_refund_only(ctx, h.charge, 'released_by_owner')
  h.given_up = 1
  put_hold(h)
  drop_login(h)
  return { 'RELEASED', h.state }
end
return { 'ALREADY_TERMINAL', h.state }
