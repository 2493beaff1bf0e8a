--[[ queue_restore: put an event's waiting room back from the ledger, while its rebuild holds
the event a DRAFT (persistence/rebuild.py; ADR 0029).
KEYS[1..6] the event hash, the queue keys and the outbox (engine/model/keys.py queue_keys; _queue.lua)
ARGV[1] ROOM: ARGV[2] per_s ARGV[3] factor_pct ARGV[4] ttl_ms ARGV[5] auto (1|0) ARGV[6] secret
  ARGV[7] seq (places taken) ARGV[8] pre (taken before T0) ARGV[9] first_ms ARGV[10] cursor
  (the last place admitted, -1: none) ARGV[11] admitted ARGV[12] used ARGV[13] lapsed
  ARGV[14] drawn (1|0)
ARGV[1] PLACES: then per entry five: login, place, admitted_ms (0: waiting), hold id ('': not
  spent), joined_ms
Returns {code, ...}: RESTORED | NO_QUEUE (places before the room) | NOT_DRAFT | NOT_FOUND
Invariants: only while the event is a DRAFT; ROOM replaces whatever room the keys held (the
ledger's is the room); an admission not spent counts against the free units until its deadline
(a lapsed one is lapsed by the next look); the token bucket starts full and the rate at 0;
nothing is written to the outbox: the ledger holds these changes. ]]
local status = redis.call('HGET', K_EVENT, 'status')
if not status then return { 'NOT_FOUND' } end
if status ~= 'draft' then return { 'NOT_DRAFT' } end
if ARGV[1] == 'ROOM' then
  redis.call('DEL', K_QUEUE, K_ENTRIES, K_ORDER, K_LAPSES)
  redis.call('HSET', K_QUEUE, 'per_s', ARGV[2], 'factor_pct', ARGV[3], 'ttl_ms', ARGV[4],
    'auto', ARGV[5], 'secret', ARGV[6], 'seq', ARGV[7], 'pre', ARGV[8], 'first_ms', ARGV[9],
    'cursor', ARGV[10], 'admitted', ARGV[11], 'used', ARGV[12], 'lapsed', ARGV[13])
  if ARGV[14] == '1' then redis.call('HSET', K_QUEUE, 'drawn', 1) end
  return { 'RESTORED' }
end
if ARGV[1] ~= 'PLACES' or (#ARGV - 1) % 5 ~= 0 then
  return redis.error_reply('BAD_ARGS ROOM or PLACES and five fields an entry')
end
local ttl = tonumber(redis.call('HGET', K_QUEUE, 'ttl_ms'))
if not ttl then return { 'NO_QUEUE' } end
for i = 2, #ARGV, 5 do
  local e = { login = ARGV[i], score = ARGV[i + 1], admitted_ms = tonumber(ARGV[i + 2]),
    hold = ARGV[i + 3], joined_ms = tonumber(ARGV[i + 4]) }
  entry_put(e)
  redis.call('ZADD', K_ORDER, e.score, e.login)
  if e.admitted_ms > 0 and e.hold == '' then
    redis.call('ZADD', K_LAPSES, e.admitted_ms + ttl, e.login)
  end
end
return { 'RESTORED' }
