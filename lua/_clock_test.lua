-- _clock_test: a controllable clock for tests that must land exactly on a deadline. It reads
-- the event hash field test_now_ms when set, else TIME. Only Scripts(test_clock=True) (engine.store.scripts)
-- builds a library with it; production settings have no way to select it, and its library and
-- functions have other names, so a production process can never run them by accident.
local function now_ms()
  local fixed = redis.call('HGET', K_EVENT, 'test_now_ms')
  if fixed then return tonumber(fixed) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
