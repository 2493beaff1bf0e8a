--[[ _keys: the event key set and each call's own state, first in the library that
engine/store/scripts.py loads (FUNCTION LOAD; ADR 0032). The library's functions are defined once and
called many times, so nothing outside a call may keep state from one call to the next:
`bind_keys(KEYS)` starts every call, naming its keys and emptying the identity maps.
KEYS is always the event key set, in the order of engine/model/keys.py EVENT_KEYS:
KEYS[1] event hash (config + seat counters)   KEYS[2] seats zset (seat -> rank, every seat)
KEYS[3] free zset (FREE seats -> rank)         KEYS[4] owners hash (seat -> "H|B|S:<hold_id>")
KEYS[5] holds hash (hold_id -> json)           KEYS[6] charges hash (charge_id -> json)
KEYS[7] logins hash (login -> active hold id)  KEYS[8] deadlines zset (RESERVED hold -> expires_ms)
KEYS[9] quarantines zset (hold -> until_ms)    KEYS[10] refunds zset (charge -> due ms)
KEYS[11] attempts hash (attempt id -> charge)  KEYS[12] callbacks hash (provider event id -> reply)
KEYS[13] outbox stream                         KEYS[14] sections hash (seat -> section)
KEYS[15] alerts hash (alert id -> json): provider messages we refused to act on, for ops
KEYS[16] restock channel (pub/sub; passed with the keys so no script builds a name)
KEYS[17] watch zset (charge -> since ms): CHARGING since created, DECLINED/FAILED since decided
KEYS[18] quota hash (per login: 'claim:'/'charge:' rate buckets, 'bought:' units confirmed)
KEYS[19] ended zset (hold -> decided ms): RELEASED/EXPIRED holds that never had a charge,
  trimmed once the ledger has them and the retention passed (lua/hold_trim.lua)
KEYS[20] stock hash (quantity stock: '<sku>:price', '<sku>@<location>:<counter>' with counter
  on_hand, available, held, blocked, sold; lua/_stock.lua)
KEYS[21] corrections hash (stock correction id -> json of the applied correction)
KEYS[22] codes hash: presale windows and their access codes, each code's uses (lua/_lib.lua,
  lua/codes_add.lua; ADR 0049)
KEYS[23] the due index, not the event's own: event id -> the earliest deadline or quarantine
  end of its holds (or earlier), kept with `due_at` in the event hash (lua/_lib.lua due_by)
KEYS[24] the trim index, not the event's own: event id -> when its oldest ended hold of
  KEYS[19] ended (or earlier); KEYS[25] the refund index: its earliest refund due of KEYS[10]
  (or earlier); KEYS[26] the watch index: its oldest entry of KEYS[17] (or earlier)
  (lua/_lib.lua index_by, lua/event_reindex.lua; ADR 0051)
]]

local K_EVENT, K_SEATS, K_FREE, K_OWNERS
local K_HOLDS, K_CHARGES, K_LOGINS, K_DEADLINES
local K_QUARANTINES, K_REFUNDS, K_ATTEMPTS, K_CALLBACKS
local K_OUTBOX, K_SECTIONS, K_ALERTS, K_RESTOCKED
local K_WATCH, K_QUOTA, K_ENDED, K_STOCK, K_CORRECTIONS, K_CODES, K_DUE
local K_TRIMS, K_REFUND_IX, K_WATCH_IX

-- Identity map: within one call, each hold and charge is decoded once and every path works on
-- that same table, so a nested step (settle marking a charge resolve-by-refund, say) can never
-- be overwritten by a stale copy held by its caller. Emptied by bind_keys at every call.
local HOLDS, CHARGES
-- Per call: the lowest score this call wrote for the event in each index across events, and
-- the event's id as its keys name it (lua/_lib.lua index_by).
local INDEXED, EVENT_ID

local function bind_keys(keys)
  K_EVENT, K_SEATS, K_FREE, K_OWNERS = keys[1], keys[2], keys[3], keys[4]
  K_HOLDS, K_CHARGES, K_LOGINS, K_DEADLINES = keys[5], keys[6], keys[7], keys[8]
  K_QUARANTINES, K_REFUNDS, K_ATTEMPTS, K_CALLBACKS = keys[9], keys[10], keys[11], keys[12]
  K_OUTBOX, K_SECTIONS, K_ALERTS, K_RESTOCKED = keys[13], keys[14], keys[15], keys[16]
  K_WATCH, K_QUOTA, K_ENDED, K_STOCK, K_CORRECTIONS = keys[17], keys[18], keys[19], keys[20],
    keys[21]
  K_CODES, K_DUE, K_TRIMS, K_REFUND_IX, K_WATCH_IX = keys[22], keys[23], keys[24], keys[25],
    keys[26]
  HOLDS, CHARGES, INDEXED, EVENT_ID = {}, {}, {}, nil
end
