-- the @register script: write a recurrence registration.
-- KEYS[1] = the repeat set, KEYS[2] = the repeat:<name> record
-- ARGV[1] = name, ARGV[2] = every_ms, ARGV[3] = template, ARGV[4] = the first-run ms (HOST clock)
-- Reply: 1 registered, 0 a live name already registered (nothing written).
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
redis.call('HSET', KEYS[2], 'every_ms', ARGV[2], 'template', ARGV[3])
redis.call('ZADD', KEYS[1], tonumber(ARGV[4]), ARGV[1])
return 1
