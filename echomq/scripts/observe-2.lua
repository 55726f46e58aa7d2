-- the @observe script: fold one consumer's recent numbers into the queue's server-side
-- metrics, so any dashboard or /metrics scrape reports the whole fleet.
-- KEYS[1] = emq:{q}:metrics (hash), KEYS[2] = emq:{q}:series (hash, a per-minute ring)
-- ARGV[1] = jobs completed, ARGV[2] = jobs failed (since the last observe),
-- ARGV[3] = handler seconds summed, ARGV[4] = handler runs,
-- ARGV[5] = the last beat's seconds (-1: none), ARGV[6] = the degraded streak (-1: none),
-- ARGV[7..] = handler runs per duration bucket, in metrics.BUCKETS_S order, +Inf last
-- Reply: 1. The minute ring is priced on the SERVER clock (TIME): slot = minute mod 1440
-- (a day), reset when its stamp names another minute, so readers never see a day-old count.
--@include now
local now = now_ms()
local minute = math.floor(now / 60000)
local slot = tostring(minute % 1440)
if redis.call('HGET', KEYS[2], slot .. ':t') ~= tostring(minute) then
  redis.call('HSET', KEYS[2], slot .. ':t', minute, slot .. ':c', 0, slot .. ':f', 0)
end
if ARGV[1] ~= '0' then redis.call('HINCRBY', KEYS[2], slot .. ':c', ARGV[1]) end
if ARGV[2] ~= '0' then redis.call('HINCRBY', KEYS[2], slot .. ':f', ARGV[2]) end
if ARGV[4] ~= '0' then
  redis.call('HINCRBYFLOAT', KEYS[1], 'h:sum', ARGV[3])
  redis.call('HINCRBY', KEYS[1], 'h:count', ARGV[4])
  for i = 7, #ARGV do
    if ARGV[i] ~= '0' then redis.call('HINCRBY', KEYS[1], 'h:' .. (i - 7), ARGV[i]) end
  end
end
if ARGV[5] ~= '-1' then
  redis.call('HSET', KEYS[1], 'beat:last', ARGV[5])
  redis.call('HINCRBYFLOAT', KEYS[1], 'beat:sum', ARGV[5])
  redis.call('HINCRBY', KEYS[1], 'beat:count', 1)
end
if ARGV[6] ~= '-1' then redis.call('HSET', KEYS[1], 'degraded', ARGV[6]) end
redis.call('HSET', KEYS[1], 'at', now)
return 1
