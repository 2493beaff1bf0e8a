--[[ event_close: stop the sale: no new claims or charge starts from now on (status closed).
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[1] actor (who closed it, for the record)
Returns {code, ...}: CLOSED status | ALREADY_CLOSED status | FENCED | NOT_FOUND
Invariants: only the status moves (draft or open -> closed), recorded once in the outbox (kind
event, EVENT_CLOSED); seats, holds, charges and counters are untouched: holds run on to their
deadlines, callbacks, the sweeper and refunds keep deciding; a repeat changes nothing. ]]
local ctx = context()
if not ctx then return { 'NOT_FOUND' } end
local status = ctx.cfg.status
if status == 'closed' or status == 'cancelled' then return { 'ALREADY_CLOSED', status } end
if status == 'fenced' then return { 'FENCED' } end
redis.call('HSET', K_EVENT, 'status', 'closed', 'closed_at_ms', ctx.now)
emit(ctx, 'event', ctx.cfg.id, status, 'EVENT_CLOSED', 0, nil, nil, 'closed_by:' .. ARGV[1])
return { 'CLOSED', 'closed' }
