--[[ event_seats_add: add a chunk of seats (id, rank, section) to a DRAFT event, all or none.
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[1..3n] seat_id, rank, section triples, 1 <= n <= 1000 (engine/store/transitions.py SEATS_CHUNK_MAX)
Returns {code, ...}: ADDED n | NOT_FOUND | NOT_DRAFT | DUPLICATE_SEAT seat_id | WRONG_KIND kind (a stock event)
Invariants: seats are only added before the sale opens; a chunk is checked whole before any
write; a rank is a finite number (an infinite or NaN score, or a chunk past 1000 seats, is a
caller's bug, refused as such). A chunk costs a handful of commands, whatever its size, so
one call stays short and Redis serves buyers between the chunks of a large seat map. ]]
local status = redis.call('HGET', K_EVENT, 'status')
if not status then return { 'NOT_FOUND' } end
if status ~= 'draft' then return { 'NOT_DRAFT' } end
if redis.call('HGET', K_EVENT, 'kind') == 'stock' then return { 'WRONG_KIND', 'stock' } end
local n = #ARGV / 3
if #ARGV % 3 ~= 0 or n < 1 or n > 1000 then
  return redis.error_reply('BAD_ARGS 1 to 1000 seat triples expected')
end
local ids, scored, sections, seen = {}, {}, {}, {}
for i = 1, #ARGV, 3 do
  local id, rank, section = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2]
  if (not rank) or rank ~= rank or rank == math.huge or rank == -math.huge then
    return redis.error_reply('BAD_ARGS rank of ' .. id)
  end
  if seen[id] then return { 'DUPLICATE_SEAT', id } end
  seen[id] = true
  ids[#ids + 1] = id
  scored[#scored + 1] = rank
  scored[#scored + 1] = id
  if section ~= '' then
    sections[#sections + 1] = id
    sections[#sections + 1] = section
  end
end
local known = redis.call('ZMSCORE', K_SEATS, unpack(ids))
for i = 1, n do
  if known[i] then return { 'DUPLICATE_SEAT', ids[i] } end
end
redis.call('ZADD', K_SEATS, unpack(scored))
redis.call('ZADD', K_FREE, unpack(scored))
if #sections > 0 then redis.call('HSET', K_SECTIONS, unpack(sections)) end
redis.call('HINCRBY', K_EVENT, 'seats_total', n)
redis.call('HINCRBY', K_EVENT, 'free', n)
return { 'ADDED', n }
