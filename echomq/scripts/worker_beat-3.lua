-- the @worker_beat script: a worker's heartbeat, carrying what it runs now when that changed.
-- KEYS[1] = emq:{workers}:index, KEYS[2] = emq:{workers}:w:<id>, KEYS[3] = its busy key
-- ARGV[1] = the worker id, ARGV[2] = ttl ms (two heartbeat periods),
-- ARGV[3] = the busy snapshot (JSON) or '' (unchanged), ARGV[4] = the worker's state
-- ('running', 'quiet', 'stopping') or '' (unchanged)
-- Reply: {1, now} renewed: seen = now (SERVER ms), the index scores now, the hash and the
-- busy key expire ttl ms from now; {0, now}: no registration (it expired while the worker
-- could not beat, or was removed): nothing written, the worker registers again.
--@include now
local now = now_ms()
if redis.call('EXISTS', KEYS[2]) == 0 then
  return {0, now}
end
local ttl = tonumber(ARGV[2])
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[2], 'seen', now, 'state', ARGV[4])
else
  redis.call('HSET', KEYS[2], 'seen', now)
end
redis.call('PEXPIRE', KEYS[2], ttl)
if ARGV[3] ~= '' then
  redis.call('SET', KEYS[3], ARGV[3], 'PX', ttl)
else
  redis.call('PEXPIRE', KEYS[3], ttl)
end
redis.call('ZADD', KEYS[1], now, ARGV[1])
return {1, now}
