--[[ charge_start: register a charge (our charge id, minted by the server = the provider idempotency key) on a live hold.
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[1] hold_id   ARGV[2] login   ARGV[3] charge_id   ARGV[4] amount (minor units)
ARGV[5] charge starts per second per login (0: no limit)   ARGV[6] burst
Returns {code, ...}: OK charge_id expires_ms | REPLAY charge_id state | CHARGE_IN_FLIGHT charge_id |
  HOLD_NOT_LIVE state | NOT_OWNER | NOT_FOUND | IDEMPOTENCY_KEY_REUSED | NOT_OPEN |
  CLOSED status (closed or cancelled by an operator) | RATE_LIMITED retry_after_ms
Invariants: at most one charge CHARGING per hold (the in-flight one); a charge is only started on
a hold that is RESERVED and live by the deadline rule; the start is recorded in the outbox;
every call spends one of the login's charge-start tokens. ]]
local hold_id, login, charge_id = ARGV[1], ARGV[2], ARGV[3]
local amount, per_s, burst = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
if charge_id == '' or not amount or amount < 0 or not (per_s and burst) then
  return redis.error_reply('BAD_ARGS charge_id, amount and limits')
end
local ctx = context()
if not ctx then return { 'NOT_FOUND' } end
local wait_ms = take_token(ctx, 'charge:' .. login, per_s, burst)
if wait_ms > 0 then return { 'RATE_LIMITED', wait_ms } end
local h = get_hold(hold_id)
if not h then return { 'NOT_FOUND' } end
if h.login ~= login then return { 'NOT_OWNER' } end
-- No money is asked for on an event that is not selling (fenced, or being rebuilt).
if SALE_ENDED[ctx.cfg.status] then return { 'CLOSED', ctx.cfg.status } end
if ctx.cfg.status ~= 'open' then return { 'NOT_OPEN' } end
local existing = get_charge(charge_id)
if existing then
  if existing.hold ~= hold_id then return { 'IDEMPOTENCY_KEY_REUSED' } end
  return { 'REPLAY', existing.id, existing.state }
end
settle(ctx, h)
if h.state ~= RESERVED then return { 'HOLD_NOT_LIVE', h.state } end
if h.charge ~= '' then return { 'CHARGE_IN_FLIGHT', h.charge } end
local c = { id = charge_id, key = charge_id, hold = h.id, seat = h.seat, login = h.login,
  state = CHARGING, attempt = '', intent = '', refund_only = 0, amount = amount, captured = 0,
  created_ms = ctx.now, decided_ms = 0, refund_attempts = 0, reason = '', final = 0 }
put_charge(c)
h.charge = charge_id
if h.charges == '' then h.charges = charge_id else h.charges = h.charges .. ',' .. charge_id end
put_hold(h)
emit(ctx, 'charge', c.id, '', CHARGING, 0, h, c, 'started')
return { 'OK', charge_id, h.expires_ms }
