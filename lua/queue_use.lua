--[[ queue_use: spend a login's admission on one claim (the claim script is the next call).
KEYS[1..6] the event hash, the queue keys and the outbox (engine/model/keys.py queue_keys; _queue.lua)
ARGV[1] login   ARGV[2] hold_id (the claim's, made from its Idempotency-Key)   ARGV[3]
  admitted_ms of the admission the token names   ARGV[4] grace_ms: how long the spent admission
  still counts against the free units (its claim, the next call, lands within it)
Returns {code, ...}: OK | REPLAY (the claim that spent it, sent again while the admission is
  live) | USED (spent by another claim) | EXPIRED (lapsed, or a token of an earlier admission) |
  NOT_ADMITTED | NO_FREE (no unit is free now: the admission is kept) | SOLD_OUT | NOT_OPEN |
  NO_QUEUE | NOT_FOUND
Invariants: an admission is spent once, by one hold id, and only while it is live, the sale open
and a unit free; every refusal writes nothing; nothing here touches seats or holds; a spend is
an outbox record ADMISSION_SPENT (the login, the hold id). ]]
local login, hold_id, token_ms, grace_ms = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
if login == '' or hold_id == '' or not string.match(token_ms or '', '^%d+$') or not grace_ms then
  return redis.error_reply('BAD_ARGS login, hold_id, admitted_ms and grace_ms')
end
local ctx = context()
if not ctx then return { 'NOT_FOUND' } end
local q = queue_settings()
if not q then return { 'NO_QUEUE' } end
if ctx.cfg.status ~= 'open' then return { 'NOT_OPEN' } end  -- the claim script says why
local e = entry_get(login)
if not e or e.admitted_ms == 0 then return { 'NOT_ADMITTED' } end
if string.format('%.0f', e.admitted_ms) ~= token_ms then return { 'EXPIRED' } end
local live = ctx.now < e.admitted_ms + q.ttl_ms
if e.hold ~= '' then
  if e.hold ~= hold_id then return { 'USED' } end
  -- The same claim again (its answer was lost, or it was refused and is retried under the same
  -- Idempotency-Key): through while the admission would still be live, never after.
  if live then return { 'REPLAY' } end
  return { 'EXPIRED' }
end
if not live then return { 'EXPIRED' } end
local free, held, blocked = units_now()
if free + held + blocked == 0 then return { 'SOLD_OUT' } end
if free == 0 then return { 'NO_FREE' } end
e.hold = hold_id
entry_put(e)
-- No longer unused, but its claim has not taken the unit yet: until the grace ends it counts as
-- a spend in flight (a negative score, see _queue.lua), so no look admits another for that unit.
redis.call('ZREM', K_LAPSES, login)
redis.call('ZADD', K_LAPSES, -(ctx.now + grace_ms), SPENT .. login)
redis.call('HINCRBY', K_QUEUE, 'used', 1)
-- The place in the decision id: the same claim key spent again after a rejoin is a new spend.
queue_record(ctx, login, 'ADMISSION_SPENT', login, hold_id, hold_id .. '@' .. e.score, nil)
return { 'OK' }
