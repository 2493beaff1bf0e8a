--[[ event_restore: put back one confirmed sale or one charge of a DRAFT event, from the ledger.
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua)
ARGV[1] HOLD: ARGV[2] hold_id ARGV[3] login ARGV[4] seat ARGV[5] winner charge id ARGV[6] decided_ms
  ARGV[7] state (CONFIRMED or EXCEPTION takes its seat; EXPIRED, RELEASED or REVOKED is a record
  without a seat)
ARGV[1] CHARGE: ARGV[2] charge_id ARGV[3] state ARGV[4] hold_id ('' if the hold is gone)
  ARGV[5] seat ARGV[6] login ARGV[7] amount ARGV[8] attempt ARGV[9] intent ARGV[10] decided_ms
  ARGV[11] refund_only (1|0)   ARGV[12] captured amount   ARGV[13] provider key ('' = charge id)
  ARGV[14] final (1|0: its terminal record is in the ledger)   ARGV[15] part_of (a part of an
  order: the charge whose money it gives back, ADR 0043; '')   ARGV[16] parted (what its parts
  give back)
ARGV[1] STOCK: ARGV[2] sku ARGV[3] location ARGV[4] on hand (the ledger's last correction)
ARGV[1] CORRECTION: ARGV[2] correction id ARGV[3] its json (kept so a replay stays a replay)
ARGV[1] CODES: ARGV[2] json {presales: name -> [opens_at_ms, closes_at_ms], codes: code -> terms,
  used: 'u:<code>' or 'l:<code>:<login>' -> uses by sales} (ADR 0049: the presales' codes, their
  uses those of the sales the ledger holds; live holds did not survive)
Returns {code, ...}: RESTORED | EXISTS | NOT_DRAFT | SEAT_NOT_FREE | NOT_FOUND
Invariants: only while the rebuilt event is a DRAFT; a restored sale takes its seats (all of a
party, or none) out of the free set exactly once, or its stock lines (all, or none) from
available to sold; a location's on hand is restored once, before any sale; ended holds come back as records (a replayed claim id gets its first
outcome) without a seat, those naming no charge indexed in `ended` to be trimmed like any other
(ADR 0018); a REFUNDING charge is queued for its refund; nothing is written to the
outbox: the ledger holds these decisions. ]]
local status = redis.call('HGET', K_EVENT, 'status')
if not status then return { 'NOT_FOUND' } end
if status ~= 'draft' then return { 'NOT_DRAFT' } end
if ARGV[1] == 'HOLD' then
  local hold_id, login, seat, state = ARGV[2], ARGV[3], ARGV[4], ARGV[7]
  local seated = state == CONFIRMED or state == EXCEPTION
  if not seated and state ~= EXPIRED and state ~= RELEASED and state ~= REVOKED then
    return redis.error_reply('BAD_ARGS hold state ' .. tostring(state))
  end
  if get_hold(hold_id) then return { 'EXISTS' } end
  local bucket, amount = '', 0
  if seated and is_stock({ seat = seat }) then
    local lines = lines_of(seat)
    for _, line in ipairs(lines) do
      if stock_get(line.sku, line.loc, 'available') < line.qty then return { 'SEAT_NOT_FREE' } end
    end
    for _, line in ipairs(lines) do
      stock_add(line.sku, line.loc, 'available', -line.qty)
      stock_add(line.sku, line.loc, 'sold', line.qty)
    end
    counters('free', 'sold', stock_units(seat))
    count_bought(login, stock_units(seat))
    bucket = 'S'
    for _, line in ipairs(lines) do
      amount = amount + line.qty * tonumber(redis.call('HGET', K_STOCK, line.sku .. ':price') or 0)
    end
  elseif seated then
    local seats, seen = seats_of({ seat = seat }), {}  -- a party's seats, comma-separated
    for _, one in ipairs(seats) do
      -- A seat listed twice is not free the second time: taking it once would count it twice.
      if seen[one] or not redis.call('ZSCORE', K_FREE, one) then return { 'SEAT_NOT_FREE' } end
      seen[one] = true
    end
    for _, one in ipairs(seats) do
      redis.call('ZREM', K_FREE, one)
      redis.call('HSET', K_OWNERS, one, 'S:' .. hold_id)
    end
    counters('free', 'sold', #seats)
    count_bought(login, #seats)  -- the per-login cap counts restored sales too
  end
  put_hold({ id = hold_id, login = login, seat = seat, state = state,
    created_ms = tonumber(ARGV[6]), expires_ms = tonumber(ARGV[6]), charge = '', blocking = '',
    winner = (seated or state == REVOKED) and ARGV[5] or '', until_ms = 0,
    decided_ms = tonumber(ARGV[6]), reason = 'restored', charges = ARGV[5], bucket = bucket,
    amount = amount })
  if (state == EXPIRED or state == RELEASED) and ARGV[5] == '' then
    -- Its decision is in the ledger already (no `record`): trimmed once the retention passed.
    redis.call('ZADD', K_ENDED, tonumber(ARGV[6]), hold_id)
    index_by(K_TRIMS, tonumber(ARGV[6]))
  end
  return { 'RESTORED' }
elseif ARGV[1] == 'CHARGE' then
  local charge_id, state = ARGV[2], ARGV[3]
  if get_charge(charge_id) then return { 'EXISTS' } end
  local c = { id = charge_id, hold = ARGV[4], seat = ARGV[5], login = ARGV[6], state = state,
    attempt = ARGV[8], intent = ARGV[9], refund_only = tonumber(ARGV[11]),
    amount = tonumber(ARGV[7]), created_ms = tonumber(ARGV[10]),
    decided_ms = tonumber(ARGV[10]), refund_attempts = 0, reason = 'restored',
    captured = tonumber(ARGV[12]) or 0, key = (ARGV[13] ~= nil and ARGV[13] ~= '') and ARGV[13]
    or charge_id, final = tonumber(ARGV[14]) or 0 }
  if (ARGV[15] or '') ~= '' then
    c.part_of = ARGV[15]
    -- Its order's charge (restored first) knows its parts again: a replay of its key, and a
    -- provider giving back everything, find it.
    local parent = get_charge(c.part_of)
    if parent then
      parent.parts = parent.parts or {}
      parent.parts[charge_id] = 1
      put_charge(parent)
    end
  end
  if (tonumber(ARGV[16]) or 0) > 0 then c.parted = tonumber(ARGV[16]) end
  put_charge(c)
  if c.attempt ~= '' and not c.part_of then redis.call('HSET', K_ATTEMPTS, c.attempt, charge_id) end
  if state == REFUNDING then refund_due(0, charge_id) end
  return { 'RESTORED' }
elseif ARGV[1] == 'STOCK' then
  local sku, loc, on_hand = ARGV[2], ARGV[3], tonumber(ARGV[4])
  if not on_hand or on_hand < 0 then return redis.error_reply('BAD_ARGS on hand') end
  if not redis.call('HGET', K_STOCK, sku .. '@' .. loc .. ':on_hand') then
    return { 'NOT_FOUND' }
  end
  if stock_get(sku, loc, 'on_hand') ~= 0 then return { 'EXISTS' } end
  stock_add(sku, loc, 'on_hand', on_hand)
  stock_add(sku, loc, 'available', on_hand)
  redis.call('HINCRBY', K_EVENT, 'seats_total', on_hand)
  redis.call('HINCRBY', K_EVENT, 'free', on_hand)
  return { 'RESTORED' }
elseif ARGV[1] == 'CORRECTION' then
  if redis.call('HSETNX', K_CORRECTIONS, ARGV[2], ARGV[3]) == 0 then return { 'EXISTS' } end
  return { 'RESTORED' }
elseif ARGV[1] == 'CODES' then
  if redis.call('HEXISTS', K_CODES, 'presales') == 1 then return { 'EXISTS' } end
  local all = cjson.decode(ARGV[2])
  redis.call('HSET', K_CODES, 'presales', cjson.encode(all.presales))
  for code, terms in pairs(all.codes) do
    redis.call('HSET', K_CODES, 'c:' .. code, cjson.encode(terms))
  end
  for field, n in pairs(all.used) do redis.call('HSET', K_CODES, field, n) end
  return { 'RESTORED' }
end
return redis.error_reply('BAD_ARGS kind ' .. tostring(ARGV[1]))
