-- the @advance script: move a registration's next run.
-- KEYS[1] = the repeat set, KEYS[2] = the repeat:<name> record
-- ARGV[1] = name, ARGV[2] = the next-run ms (HOST now + every_ms, priced by the caller)
-- Reply: 1 advanced, 0 the record is gone (cancelled mid-sweep): the dangling member is
-- removed from the repeat set.
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 0
end
redis.call('ZADD', KEYS[1], tonumber(ARGV[2]), ARGV[1])
return 1
