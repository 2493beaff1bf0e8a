--[[ codes_add: access codes for a presale window of an event, in bulk (ADR 0049).
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[1] presale name   ARGV[2] opens_at_ms   ARGV[3] closes_at_ms (the window: a claim before T0
  needs a code of a window open then)   ARGV[4] uses (holds a code may be spent by, live or
  sold)   ARGV[5] per login (0: no limit of its own)   ARGV[6] expires_ms (no use after it)
ARGV[7] batch id (the record's decision id: a batch sent again is one batch)   ARGV[8..] codes
Returns {code, ...}: OK added existing (codes new, and codes already there with the same terms) |
  NOT_FOUND | CLOSED status | PRESALE_MISMATCH opens_at_ms closes_at_ms (the window exists with
  other times) | CODE_EXISTS code (a code of another window or other terms)
Invariants: all or nothing: every code is checked before any is written; a code is never
redefined (its uses so far would be judged by other terms); one outbox record (kind `presale`,
`to` CODES_ADDED, with the batch's new codes and terms) when a code is added, none when every
code was there already. ]]
local name, opens, closes = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local uses, per_login, expires = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local batch = ARGV[7]
if name == '' or batch == '' or not (opens and closes and uses and per_login and expires)
  or closes <= opens or uses < 1 or per_login < 0 or #ARGV < 8 then
  return redis.error_reply('BAD_ARGS presale, window, uses, expiry, batch and codes')
end
local ctx = context()
if not ctx then return { 'NOT_FOUND' } end
if SALE_ENDED[ctx.cfg.status] then return { 'CLOSED', ctx.cfg.status } end

local windows = cjson.decode(redis.call('HGET', K_CODES, 'presales') or '{}')
local w = windows[name]
if w and (w[1] ~= opens or w[2] ~= closes) then
  return { 'PRESALE_MISMATCH', string.format('%.0f', w[1]), string.format('%.0f', w[2]) }
end
local terms = cjson.encode({ presale = name, uses = uses, per_login = per_login,
  expires_ms = expires })
local added, existing = {}, 0
for i = 8, #ARGV do
  local raw = redis.call('HGET', K_CODES, 'c:' .. ARGV[i])
  if raw then
    local c = cjson.decode(raw)
    if c.presale ~= name or c.uses ~= uses or c.per_login ~= per_login
      or c.expires_ms ~= expires then
      return { 'CODE_EXISTS', ARGV[i] }
    end
    existing = existing + 1
  else
    added[#added + 1] = ARGV[i]
  end
end
if #added == 0 then return { 'OK', 0, existing } end
if not w then
  windows[name] = { opens, closes }
  redis.call('HSET', K_CODES, 'presales', cjson.encode(windows))
end
for _, code in ipairs(added) do redis.call('HSET', K_CODES, 'c:' .. code, terms) end
ctx.extra = { 'codes', table.concat(added, ','), 'presale', string.format('%.0f|%.0f|%d|%d|%.0f',
  opens, closes, uses, per_login, expires) }
emit(ctx, 'presale', name, '', 'CODES_ADDED', 0, nil, nil, 'codes_added', batch)
return { 'OK', #added, existing }
