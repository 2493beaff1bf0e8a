--[[ hold_expire: the sweeper's step, expire-if-still-held for a bounded batch of overdue holds.
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[1] batch_max (holds examined per call)
Returns {code, ...}: SWEPT examined expired quarantined remaining_due | NOT_FOUND
Invariants: only holds still RESERVED with now >= expires_ms change (the deadline rule in
_lib.lua settle); with a charge in flight the hold goes QUARANTINED under the quarantine policy
(seat BLOCKED), or EXPIRED with its charge marked resolve-by-refund under release_refund; under
a grace policy it stays RESERVED (a GRACE record) until the grace ends, then as release_refund. ]]
return settle_due(ARGV[1], K_DEADLINES, 'deadline', function(_, h)
  if h.state == EXPIRED then return 1 end
  if h.state == QUARANTINED then return 2 end
end)
