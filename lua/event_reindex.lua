--[[ event_reindex: set the event's scores in the indexes across events to exactly its first work
of each kind, or take it out of an index where it has none (ADR 0051).
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[] none: everything it needs is in its keys
Returns {code, ...}: REINDEXED | NOT_FOUND
Invariants: decides nothing, writes no record; after it, each score is the earliest of the
event's deadlines and quarantine ends (KEYS[23], with `due_at`), ended holds (KEYS[24]), refunds
due (KEYS[25]) and charges watched (KEYS[26]). A worker that found an event in an index with
nothing to do calls it (a score left early by work done elsewhere), so the event is not
looked at again for nothing. ]]
local ctx = context()
if not ctx then return { 'NOT_FOUND' } end
due_again(ctx)
local first = redis.call('ZRANGE', K_ENDED, 0, 0, 'WITHSCORES')
if first[2] then redis.call('ZADD', K_TRIMS, first[2], ctx.cfg.id)
else redis.call('ZREM', K_TRIMS, ctx.cfg.id) end
first = redis.call('ZRANGE', K_REFUNDS, 0, 0, 'WITHSCORES')
if first[2] then redis.call('ZADD', K_REFUND_IX, first[2], ctx.cfg.id)
else redis.call('ZREM', K_REFUND_IX, ctx.cfg.id) end
first = redis.call('ZRANGE', K_WATCH, 0, 0, 'WITHSCORES')
if first[2] then redis.call('ZADD', K_WATCH_IX, first[2], ctx.cfg.id)
else redis.call('ZREM', K_WATCH_IX, ctx.cfg.id) end
return { 'REINDEXED' }
