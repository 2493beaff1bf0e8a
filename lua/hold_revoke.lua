--[[ hold_revoke: an operator takes back the seat of a hold whose money left (EXCEPTION -> REVOKED).
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[1] hold_id   ARGV[2] actor (who decided, for the record)
Returns {code, ...}: REVOKED | NOT_EXCEPTION state | NOT_FOUND
Invariants: only a hold in EXCEPTION is revoked; its seat goes back on sale once, recorded in the
outbox; a repeated revoke changes nothing. ]]
local ctx = context()
if not ctx then return { 'NOT_FOUND' } end
local h = get_hold(ARGV[1])
if not h then return { 'NOT_FOUND' } end
if h.state ~= EXCEPTION then return { 'NOT_EXCEPTION', h.state } end
hold_after_sale(ctx, h, REVOKED, 'revoked_by:' .. ARGV[2], 'operator')
return { 'REVOKED' }
