-- the @schedule script: admit a job fenced out of pending until its run-at.
-- KEYS[1] = the job row, KEYS[2] = the schedule set
-- ARGV[1] = id, ARGV[2] = payload, ARGV[3] = 'in' or 'at', ARGV[4] = the value
-- Reply: 1 admitted, 0 the id already has a row (nothing written).
-- 'in' prices the delay on the SERVER clock; any other mode takes the value as an
-- absolute run-at in ms (priced by the caller's clock).
--@include kind
--@include now
if not is_job(ARGV[1]) then
  return redis.error_reply(KIND_ERROR)
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
local score
if ARGV[3] == 'in' then
  score = now_ms() + tonumber(ARGV[4])
else
  score = tonumber(ARGV[4])
end
redis.call('HSET', KEYS[1], 'state', 'scheduled', 'attempts', '0', 'payload', ARGV[2])
redis.call('ZADD', KEYS[2], score, ARGV[1])
return 1
