-- the @retry script: token-fenced failure of a job in hand.
-- KEYS[1] = the job row, KEYS[2] = active, KEYS[3] = the schedule set, KEYS[4] = dead
-- ARGV[1] = id, ARGV[2] = the token, ARGV[3] = delay ms, ARGV[4] = max attempts,
-- ARGV[5] = the error text
-- Reply: 1 retrying (parked on the schedule set at SERVER now + delay, state = scheduled),
-- 2 dead (attempts reached max attempts: on the dead set at SERVER now, state = dead).
-- Either way failures is incremented and the error text is kept on the row.
-- Refusals (nothing written): EMQKIND, EMQSTALE job gone, EMQSTALE retry token mismatch,
-- EMQSTATE retry not active.
--@include kind
--@include now
if not is_job(ARGV[1]) then
  return redis.error_reply(KIND_ERROR)
end
local att = redis.call('HGET', KEYS[1], 'attempts')
if not att then return redis.error_reply('EMQSTALE job gone') end
if att ~= ARGV[2] then return redis.error_reply('EMQSTALE retry token mismatch') end
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  return redis.error_reply('EMQSTATE retry not active')
end
local now = now_ms()
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[1], 'failures', 1)
if tonumber(att) >= tonumber(ARGV[4]) then
  redis.call('HSET', KEYS[1], 'state', 'dead', 'error', ARGV[5], 'died_at', now)
  redis.call('ZADD', KEYS[4], now, ARGV[1])
  return 2
end
redis.call('HSET', KEYS[1], 'state', 'scheduled', 'error', ARGV[5])
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), ARGV[1])
return 1
