--[[ charge_abandon: the client gave up waiting on a charge (told "timed out"); free the hold to pay again.
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[1] hold_id   ARGV[2] login   ARGV[3] charge_id
Returns {code, ...}: ABANDONED | NOT_IN_FLIGHT state | NOT_OWNER | NOT_FOUND
  (a repeated abandon of the same charge answers ABANDONED again)
Invariants: the charge stays CHARGING (the provider decides it) but is marked resolve-by-refund,
so a late capture is refunded and never confirms; the hold's deadline is unchanged. ]]
local ctx = context()
if not ctx then return { 'NOT_FOUND' } end
local h = get_hold(ARGV[1])
local c = get_charge(ARGV[3])
if (not h) or (not c) or c.hold ~= h.id then return { 'NOT_FOUND' } end
if h.login ~= ARGV[2] then return { 'NOT_OWNER' } end
settle(ctx, h)
-- A replay (the flag survives whatever reason later moves of the charge record).
if (c.abandoned or 0) == 1 or c.reason == 'abandoned_by_client' then return { 'ABANDONED' } end
if h.state ~= RESERVED or h.charge ~= c.id then return { 'NOT_IN_FLIGHT', c.state } end
c.abandoned = 1
put_charge(c)
mark_refund_only(ctx, c.id, 'abandoned_by_client')
h.charge = ''
put_hold(h)
return { 'ABANDONED' }
