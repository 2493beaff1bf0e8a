--[[ queue_setup: give an event a waiting room, or change its admission settings, before T0.
KEYS[1..6] the event hash, the queue keys and the outbox (engine/model/keys.py queue_keys; _queue.lua)
ARGV[1] admit_per_s   ARGV[2] admit_factor_pct (100 or more)   ARGV[3] admission_ttl_ms
ARGV[4] '1': admit_per_s is the engine's claim capacity (auto), '0': the operator's number
ARGV[5] secret (hex; signs admissions and draws places; kept when the room has one)
Returns {code, ...}: CONFIGURED created (1: the room is new) | STARTED opens_at_ms | CLOSED
  status | FENCED | NOT_FOUND
Invariants: only a draft, or an open sale whose T0 is still to come: once the sale started no
setting changes; the secret never changes once set, so a place drawn stays drawn; no entry,
seat or hold is touched; each setup is an outbox record ROOM_SET with the settings and the
secret ('per_s|pct|ttl|auto|secret'), so a rebuild puts the same room back. ]]
local per_s, pct, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if not (per_s and pct and ttl) or per_s < 1 or pct < 100 or ttl < 1000
    or (ARGV[4] ~= '0' and ARGV[4] ~= '1') or not string.match(ARGV[5] or '', '^%x+$') then
  return redis.error_reply('BAD_ARGS admit_per_s, admit_factor_pct, admission_ttl_ms, secret')
end
local ctx = context()
if not ctx then return { 'NOT_FOUND' } end
local status = ctx.cfg.status
if SALE_ENDED[status] then return { 'CLOSED', status } end
if status == 'open' and ctx.now >= ctx.cfg.opens_at_ms then
  return { 'STARTED', ctx.cfg.opens_at_ms }
end
if status ~= 'draft' and status ~= 'open' then return { 'FENCED' } end
local created = redis.call('HSETNX', K_QUEUE, 'secret', ARGV[5])
redis.call('HSET', K_QUEUE, 'per_s', per_s, 'factor_pct', pct, 'ttl_ms', ttl, 'auto', ARGV[4])
-- Its decision number (the one emit takes next) makes each setup's decision id its own, also
-- after a rebuild, which numbers decisions after the ledger's last one.
local number = (tonumber(redis.call('HGET', K_EVENT, 'seq')) or 0) + 1
queue_record(ctx, ctx.cfg.id, 'ROOM_SET', '', '', number, { 'room', string.format(
  '%d|%d|%d|%s|%s', per_s, pct, ttl, ARGV[4], redis.call('HGET', K_QUEUE, 'secret')) })
return { 'CONFIGURED', created }
