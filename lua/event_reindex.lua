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
index_exactly(K_TRIMS, K_ENDED)
index_exactly(K_REFUND_IX, K_REFUNDS)
index_exactly(K_WATCH_IX, K_WATCH)
return { 'REINDEXED' }
