--[[ hold_quarantine_timeout: past the quarantine hard timeout, put blocked seats back on sale.
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[1] batch_max (holds examined per call)
Returns {code, ...}: SWEPT examined expired freed remaining_due | NOT_FOUND
Invariants: a QUARANTINED hold past until_ms goes EXPIRED and its charge is marked
resolve-by-refund; a RELEASED hold's BLOCKED seat goes FREE; nothing else changes. ]]
return settle_due(ARGV[1], K_QUARANTINES, 'quarantine', function(was, h)
  if was == QUARANTINED and h.state == EXPIRED then return 1 end
  if was == RELEASED and h.blocking == '' then return 2 end
end)
