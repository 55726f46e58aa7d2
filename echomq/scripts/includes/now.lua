-- now_ms(): the SERVER clock in milliseconds, read from TIME.
local function now_ms()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end
