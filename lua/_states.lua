--[[ _states: the two automata's states and the moves their tables allow, generated
from engine/model/states.py (python -m engine.model.states > lua/_states.lua; a unit
test checks it is current): do not edit. Every hold and charge move of the scripts
goes through hold_move / charge_move (lua/_lib.lua), which refuse a pair not here. ]]

local RESERVED = 'RESERVED'
local QUARANTINED = 'QUARANTINED'
local CONFIRMED = 'CONFIRMED'
local EXPIRED = 'EXPIRED'
local RELEASED = 'RELEASED'
local EXCEPTION = 'EXCEPTION'
local REVOKED = 'REVOKED'
local CHARGING = 'CHARGING'
local CAPTURED = 'CAPTURED'
local DECLINED = 'DECLINED'
local FAILED = 'FAILED'
local REFUNDING = 'REFUNDING'
local REFUNDED = 'REFUNDED'
local PROVIDER_REFUNDED = 'PROVIDER_REFUNDED'
local DISPUTED = 'DISPUTED'
local CHARGED_BACK = 'CHARGED_BACK'
-- from -> to: the moves HOLD_TRANSITIONS allows, whatever the event
local HOLD_MOVES = {
  CONFIRMED = { EXCEPTION = true, REVOKED = true },
  EXCEPTION = { CONFIRMED = true, REVOKED = true },
  QUARANTINED = { CONFIRMED = true, EXPIRED = true },
  RESERVED = { CONFIRMED = true, EXPIRED = true, QUARANTINED = true, RELEASED = true },
}
-- from -> to: the moves CHARGE_TRANSITIONS allows, whatever the event
local CHARGE_MOVES = {
  CAPTURED = { DISPUTED = true, PROVIDER_REFUNDED = true, REFUNDING = true },
  CHARGING = { CAPTURED = true, DECLINED = true, FAILED = true, REFUNDING = true },
  DECLINED = { REFUNDING = true },
  DISPUTED = { CAPTURED = true, CHARGED_BACK = true, REFUNDING = true },
  FAILED = { REFUNDING = true },
  REFUNDED = { REFUNDED = true },
  REFUNDING = { DISPUTED = true, REFUNDED = true },
}
-- A charge's first state among these is its one terminal record (CHARGE_TERMINAL).
local TERMINAL_CHARGE = { CAPTURED = true, DECLINED = true, FAILED = true, REFUNDED = true }
