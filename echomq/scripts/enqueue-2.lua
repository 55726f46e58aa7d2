-- the @enqueue script: admit a job claimable now.
-- KEYS[1] = the job row, KEYS[2] = pending
-- ARGV[1] = id, ARGV[2] = payload
-- Reply: 1 admitted, 0 the id already has a row (nothing written).
-- Derived (same slot): the wake list, KEYS[2] with 'pending' replaced by 'wake'.
--@include kind
--@include wake
if not is_job(ARGV[1]) then
  return redis.error_reply(KIND_ERROR)
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'pending', 'attempts', '0', 'payload', ARGV[2])
-- score 0: among equal scores Valkey orders by bytes, and the id's bytes are its mint order
redis.call('ZADD', KEYS[2], 0, ARGV[1])
wake(string.sub(KEYS[2], 1, -8) .. 'wake')
return 1
