-- _clock_server: the production clock. All time decisions use the Redis server clock (TIME),
-- read inside the script that decides, so every API process and the sweeper share one clock.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
