-- the @group_defaults script: set the queue's group defaults (a task's group_limit and
-- group_rate), which every group without its own setting takes.
-- KEYS[1] = <base>gdefaults
-- ARGV[1] = the queue base, ARGV[2] = the limit ('' = none), ARGV[3] = rate max,
-- ARGV[4] = rate ms ('' and '' = no rate)
-- Reply: 1. Every group seen (<base>groups) has its ring place re-checked (ring_sync), so
-- a default limit raised or dropped frees the groups it held at once, and one lowered
-- takes the groups at it out of the ring.
--@include ring
local p = ARGV[1]
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], 'limit')
else
  redis.call('HSET', KEYS[1], 'limit', ARGV[2])
end
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], 'rate_max', 'rate_ms')
else
  redis.call('HSET', KEYS[1], 'rate_max', ARGV[3], 'rate_ms', ARGV[4])
end
for _, g in ipairs(redis.call('SMEMBERS', p .. 'groups')) do ring_sync(p, g) end
return 1
