--[[ _money: money the provider moved after a capture (a refund, a dispute opened, won or lost),
applied to a verified charge; shared by lua/charge_reversal.lua (the message itself) and
lua/charge_outcome_v2.lua (movements that arrived before the capture they follow, ADR 0036).
Invariants kept here: delivery order is not meaning. A movement about money we have not seen
captured yet (the charge CHARGING, DECLINED or FAILED), or a dispute's end before its start, is
noted on the charge (one MOVE_NOTED record, answered NOTED) and applied the moment its
predecessor lands, in the order the notes arrived; so every delivery order of one charge's
messages ends in the state and money of the in-order one. ]]

local DISPUTE_END = { DISPUTE_WON = true, DISPUTE_LOST = true }
local NOT_CAPTURED_YET = { CHARGING = true, DECLINED = true, FAILED = true }

-- Whether a movement must wait for its predecessor: money not captured yet, or a dispute that
-- ends before it was opened.
local function move_early(c, kind)
  if NOT_CAPTURED_YET[c.state] then return true end
  return DISPUTE_END[kind] == true and c.state ~= DISPUTED and (c.disputed or 0) == 0
end

-- Notes wait on the charge the message's key names (the parent: an attempt may not be bound
-- yet), tagged with their attempt.
local function move_note(ctx, c, h, move)
  local parent = get_charge(c.key or c.id) or c
  local notes = parent.early or {}
  notes[#notes + 1] = move
  parent.early = notes
  put_charge(parent)
  emit(ctx, 'charge', c.id, c.state, 'MOVE_NOTED', 0, h, c,
    'before_its_predecessor:' .. string.lower(move.kind), move.pev)
end

local function move_apply(ctx, c, h, move)
  local kind, pev = move.kind, move.pev
  if move_early(c, kind) then
    move_note(ctx, c, h, move)
    return 'NOTED'
  end
  local wins = h and h.winner == c.id
  local reason = 'provider_' .. string.lower(kind)
  if kind == 'REFUND' then
    local amount, parted = tonumber(move.claimed.amount), c.parted or 0
    local all = not amount or amount >= money_captured(c)  -- the charge's refunded total
    if c.state == REFUNDING and parted > 0 and not all then
      -- Its parts as the provider reports them, not the rest this charge gives back: that is
      -- done when the total covers the whole capture (or the refund worker's answer says so).
      return 'DUPLICATE'
    elseif c.state == REFUNDING then
      charge_move(c, REFUNDED)
      c.decided_ms = ctx.now
      redis.call('ZREM', K_REFUNDS, c.id)
      charge_record(ctx, c, REFUNDING, h, c.reason)
      if all then parts_refunded(ctx, c, 'provider_refunded_all') end
      return 'REFUNDED'
    elseif c.state == CAPTURED then
      -- Less than the charge holds: our own parts as the provider reports them (a cumulative
      -- amount within what parts gave back), or a part the provider gave back on its own.
      -- Which seats that paid for is not ours to guess: the order is treated as the money
      -- left, and the rest is given back when its seats go back on sale (ADR 0043).
      if amount and amount > 0 and amount <= parted then return 'DUPLICATE' end
      local back = parts_back(c)  -- what our parts already gave back at the provider
      local partly = not all and amount > parted
      charge_move(c, PROVIDER_REFUNDED)
      if partly then c.moved = amount - back end
      charge_record(ctx, c, CAPTURED, h, reason, pev)
      if all then parts_refunded(ctx, c, 'provider_refunded_all') end
      if wins and h.state == CONFIRMED then
        hold_after_sale(ctx, h, ctx.cfg.reversal_policy == 'revoke' and REVOKED or EXCEPTION,
          partly and 'money_partly_refunded_at_provider' or 'money_refunded_at_provider', pev)
      end
      return 'MONEY_LEFT'
    elseif c.state == PROVIDER_REFUNDED and (c.moved or 0) > 0 and amount then
      -- More of a partly refunded order left at the provider (its refunded total grew).
      c.moved = math.min(money_captured(c) - parted, math.max(c.moved, amount - parts_back(c)))
      put_charge(c)
      if all then parts_refunded(ctx, c, 'provider_refunded_all') end
      return 'DUPLICATE'
    elseif c.state == REFUNDED or c.state == PROVIDER_REFUNDED then
      return 'DUPLICATE'
    end
    raise_alert(ctx, 'pev/' .. pev, h, c, 'refund_while_' .. c.state, move.claimed)
    return 'CONTRADICTION'
  elseif kind == 'DISPUTE_OPENED' then
    -- One dispute per charge (as at Stripe): another opening is the same one notified again.
    if (c.disputed or 0) == 1 then return 'DUPLICATE' end
    if c.state == CAPTURED or c.state == REFUNDING then
      -- From REFUNDING: the buyer disputed money we were about to give back; the provider
      -- withdrew it, so our refund must not go out as well.
      local from = c.state
      charge_move(c, DISPUTED)
      c.disputed = 1
      if from == REFUNDING then redis.call('ZREM', K_REFUNDS, c.id) end
      charge_record(ctx, c, from, h, reason, pev)
      if wins and h.state == CONFIRMED then
        hold_after_sale(ctx, h, EXCEPTION, 'money_disputed', pev)
      end
      return 'DISPUTED'
    elseif c.state == DISPUTED then
      return 'DUPLICATE'
    end
    raise_alert(ctx, 'pev/' .. pev, h, c, 'dispute_while_' .. c.state, move.claimed)
    return 'CONTRADICTION'
  elseif kind == 'DISPUTE_WON' then
    if c.state == DISPUTED then
      if wins and h.state == EXCEPTION then
        charge_move(c, CAPTURED)
        charge_record(ctx, c, DISPUTED, h, reason, pev)
        hold_after_sale(ctx, h, CONFIRMED, 'dispute_won', pev)
        return 'REINSTATED'
      end
      -- The seat was taken back meanwhile: the money that came back has no seat to pay for.
      charge_move(c, REFUNDING)
      c.decided_ms = ctx.now
      c.reason = 'dispute_won_without_seat'
      refund_due(ctx.now, c.id)
      charge_record(ctx, c, DISPUTED, h, c.reason, pev)
      return 'REFUND'
    elseif c.state == CAPTURED or c.state == REFUNDING then
      return 'DUPLICATE'
    end
    raise_alert(ctx, 'pev/' .. pev, h, c, 'dispute_won_while_' .. c.state, move.claimed)
    return 'CONTRADICTION'
  end
  -- DISPUTE_LOST
  if c.state == DISPUTED then
    charge_move(c, CHARGED_BACK)
    charge_record(ctx, c, DISPUTED, h, reason, pev)
    if wins and h.state == EXCEPTION and ctx.cfg.reversal_policy == 'revoke' then
      hold_after_sale(ctx, h, REVOKED, 'dispute_lost', pev)
    end
    return 'CHARGED_BACK'
  elseif c.state == CHARGED_BACK then
    return 'DUPLICATE'
  end
  raise_alert(ctx, 'pev/' .. pev, h, c, 'dispute_lost_while_' .. c.state, move.claimed)
  return 'CONTRADICTION'
end

-- The movements noted for c's attempt, applied now that a predecessor landed (a capture, a
-- dispute opened): in the order they arrived, each once its own predecessor is there (a
-- dispute's end noted before its start waits one more round); one that must still wait stays.
local function moves_due(ctx, c, h)
  local parent = get_charge(c.key or c.id) or c
  local notes = parent.early
  if not notes or #notes == 0 then return end
  local due, kept = {}, {}
  for _, move in ipairs(notes) do
    if move.attempt == c.attempt then due[#due + 1] = move else kept[#kept + 1] = move end
  end
  if #due == 0 then return end
  local progress = true
  while progress do
    progress = false
    local waiting = {}
    for _, move in ipairs(due) do
      if move_early(c, move.kind) then
        waiting[#waiting + 1] = move
      else
        move_apply(ctx, c, h, move)
        progress = true
      end
    end
    due = waiting
  end
  for _, move in ipairs(due) do kept[#kept + 1] = move end
  parent.early = #kept > 0 and kept or nil
  put_charge(parent)
end
