--[[ event_seats_add: add a chunk of seats (id, rank, section) to a DRAFT event, all or none.
KEYS[1..17] the event key set (engine/keys.py EVENT_KEYS, documented in _lib.lua)
ARGV[1..3n] seat_id, rank, section triples
Returns {code, ...}: ADDED n | NOT_FOUND | NOT_DRAFT | DUPLICATE_SEAT seat_id
Invariants: seats are only added before the sale opens; a chunk is checked whole before any write. ]]
local status = redis.call('HGET', K_EVENT, 'status')
if not status then return { 'NOT_FOUND' } end
if status ~= 'draft' then return { 'NOT_DRAFT' } end
if #ARGV % 3 ~= 0 then return redis.error_reply('BAD_ARGS seat triples expected') end
local seen = {}
for i = 1, #ARGV, 3 do
  if not tonumber(ARGV[i + 1]) then return redis.error_reply('BAD_ARGS rank of ' .. ARGV[i]) end
  if seen[ARGV[i]] or redis.call('ZSCORE', K_SEATS, ARGV[i]) then
    return { 'DUPLICATE_SEAT', ARGV[i] }
  end
  seen[ARGV[i]] = true
end
local n = #ARGV / 3
for i = 1, #ARGV, 3 do
  redis.call('ZADD', K_SEATS, ARGV[i + 1], ARGV[i])
  redis.call('ZADD', K_FREE, ARGV[i + 1], ARGV[i])
  if ARGV[i + 2] ~= '' then redis.call('HSET', K_SECTIONS, ARGV[i], ARGV[i + 2]) end
end
redis.call('HINCRBY', K_EVENT, 'seats_total', n)
redis.call('HINCRBY', K_EVENT, 'free', n)
return { 'ADDED', n }
