-- A rate window: a sliding-window log of claim starts on the SERVER clock, exact ("never
-- more than max starts in any window of ms"). The log is bucketed by ms: <log> is a zset of
-- the ms instants that had starts (member = score = the ms), <log>:n a hash of each
-- instant's count plus 'total', so a claim of k jobs in one call costs one bucket, not k
-- entries.
-- in_window(log, ms, now): drop the buckets at or before now - ms; the starts still in
-- the window.
local function in_window(log, ms, now)
  local old = redis.call('ZRANGEBYSCORE', log, '-inf', now - ms)
  if #old > 0 then
    local n = redis.call('HMGET', log .. ':n', unpack(old))
    local gone = 0
    for _, c in ipairs(n) do gone = gone + tonumber(c or '0') end
    redis.call('ZREMRANGEBYSCORE', log, '-inf', now - ms)
    redis.call('HDEL', log .. ':n', unpack(old))
    redis.call('HINCRBY', log .. ':n', 'total', -gone)
  end
  return tonumber(redis.call('HGET', log .. ':n', 'total') or '0')
end
-- record(log, now, k): k starts at now.
local function record(log, now, k)
  redis.call('ZADD', log, now, now)
  redis.call('HINCRBY', log .. ':n', now, k)
  redis.call('HINCRBY', log .. ':n', 'total', k)
end
-- reopens_at(log, ms): the SERVER ms the oldest bucket leaves the window.
local function reopens_at(log, ms)
  local oldest = redis.call('ZRANGE', log, 0, 0, 'WITHSCORES')
  return tonumber(oldest[2]) + ms
end
