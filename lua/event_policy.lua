--[[ event_policy: change an event's deadline policies: run a candidate in shadow, promote it, or roll back.
KEYS[1..26] the event's keys and the indexes across events (engine/model/keys.py script_keys, documented in _keys.lua); writes KEYS[1]
  event hash (its policy fields only) and KEYS[13] outbox stream
ARGV[1] SHADOW | PROMOTE | ROLLBACK | RESTORE   ARGV[2] SHADOW: the candidate (quarantine |
  release_refund | grace:<ms>), '' to stop shadowing; RESTORE (a rebuild, while the event is a
  draft): ARGV[2] policy ARGV[3] its version ARGV[4] shadow ARGV[5] its version ARGV[6] previous
  ARGV[7] the last version taken, as the ledger's policy records left them
Returns {code, ...}: code policy policy_version shadow_policy shadow_version previous_policy, code
  one of SHADOWED | PROMOTED | ROLLED_BACK | RESTORED | NO_SHADOW | NO_PREVIOUS |
  SAME_AS_ENFORCED | NOT_DRAFT | FENCED | NOT_FOUND
Invariants: only the event hash's policy fields change; every change takes the next version
number (versions only grow, a rolled-back-to policy gets a new one) and is recorded in the outbox
(kind policy, id = the version) in the same step; PROMOTE enforces the shadow candidate and
remembers the policy it replaces, ROLLBACK enforces that one again; RESTORE records nothing
(the ledger holds those changes) and the next change takes a version after the last one; no
hold, charge, seat or recorded decision is touched: a change applies to the decisions made after
it (ADR 0020). ]]
local op, candidate = ARGV[1], ARGV[2] or ''
local OPS = { SHADOW = true, PROMOTE = true, ROLLBACK = true, RESTORE = true }
if not OPS[op] then return redis.error_reply('BAD_ARGS op ' .. tostring(op)) end
local names = { candidate }
if op == 'RESTORE' then names = { ARGV[2], ARGV[4], ARGV[6] } end
for i, name in ipairs(names) do
  if (i == 1 and op == 'RESTORE' or name ~= '') and not policy_spec(name) then
    return redis.error_reply('BAD_ARGS unknown policy ' .. tostring(name))
  end
end
local ctx = context()
if not ctx then return { 'NOT_FOUND', '', 0, '', 0, '' } end
local cfg = config_full(ctx.cfg)
local previous = redis.call('HGET', K_EVENT, 'policy_previous') or ''

local function reply(code)
  return { code, cfg.policy_name, cfg.policy_version, cfg.shadow_policy, cfg.shadow_version,
    previous }
end

if cfg.status == 'fenced' then return reply('FENCED') end
if op == 'RESTORE' then
  if cfg.status ~= 'draft' then return reply('NOT_DRAFT') end
  local spec = policy_spec(ARGV[2])
  local version, shadow_version, last = tonumber(ARGV[3]), tonumber(ARGV[5]), tonumber(ARGV[7])
  if not (version and shadow_version and last and last >= version and last >= shadow_version) then
    return redis.error_reply('BAD_ARGS versions')
  end
  redis.call('HSET', K_EVENT, 'policy', spec.late, 'policy_grace_ms', spec.grace_ms,
    'policy_version', version, 'shadow_policy', ARGV[4], 'shadow_version', shadow_version,
    'policy_previous', ARGV[6], 'policy_changes', last - 1)
  cfg.policy_name, cfg.policy_version, previous = ARGV[2], version, ARGV[6]
  cfg.shadow_policy, cfg.shadow_version = ARGV[4], shadow_version
  return reply('RESTORED')
end
if op == 'SHADOW' and candidate == cfg.policy_name then return reply('SAME_AS_ENFORCED') end
if (op == 'PROMOTE' or (op == 'SHADOW' and candidate == '')) and cfg.shadow_policy == '' then
  return reply('NO_SHADOW')
end
if op == 'ROLLBACK' and previous == '' then return reply('NO_PREVIOUS') end

-- Version 1 is the policy the event was created with; each change takes the next number.
local version = redis.call('HINCRBY', K_EVENT, 'policy_changes', 1) + 1

local function enforce(name)
  local spec = policy_spec(name)
  redis.call('HSET', K_EVENT, 'policy', spec.late, 'policy_grace_ms', spec.grace_ms,
    'policy_version', version)
  cfg.policy, cfg.grace_ms, cfg.policy_name, cfg.policy_version =
    spec.late, spec.grace_ms, name, version
end

local function shadow(name)
  redis.call('HSET', K_EVENT, 'shadow_policy', name, 'shadow_version', name == '' and 0 or version)
  cfg.shadow_policy, cfg.shadow_version = name, name == '' and 0 or version
end

local was = cfg.policy_name
if op == 'SHADOW' then
  shadow(candidate)
  emit(ctx, 'policy', tostring(version), was, 'SHADOW_SET', 0, nil, nil,
    candidate == '' and 'shadow_cleared' or 'shadow')
  return reply('SHADOWED')
end
if op == 'PROMOTE' then
  enforce(cfg.shadow_policy)
  shadow('')
  previous = was
  redis.call('HSET', K_EVENT, 'policy_previous', previous)
  emit(ctx, 'policy', tostring(version), was, 'POLICY_PROMOTED', 0, nil, nil, 'promote')
  return reply('PROMOTED')
end
enforce(previous)
previous = ''
redis.call('HSET', K_EVENT, 'policy_previous', '')
emit(ctx, 'policy', tostring(version), was, 'POLICY_ROLLED_BACK', 0, nil, nil, 'rollback')
return reply('ROLLED_BACK')
