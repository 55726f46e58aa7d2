-- the @group script: change a group's controls.
-- KEYS[1] = the group meta emq:{q}:g:<group>, KEYS[2] = the ring
-- ARGV[1] = the queue base, ARGV[2] = the group, ARGV[3] = the control:
--   'pause' [, until] / 'resume'  the meta's paused flag (a paused group keeps its jobs,
--                                 receives promoted ones, and releases none); with until
--                                 (SERVER ms) the pause ends by itself then: paused_until
--                                 on the meta, the group on gwait at that instant (so
--                                 reopen() resumes it and next_due_ms wakes the idle
--                                 consumers then), and a token on the due list makes them
--                                 re-read that instant now. An until at or before SERVER
--                                 now resumes it.
--   'limit', n ('' = no limit)    the concurrency limit (active jobs at most n)
--   'rate', max, ms ('' = none)   the claim rate: at most max starts in any ms window
--   'weight', w ('1' = default)    turns in the ring: w consecutive turns per round
-- Reply: 1. The group is recorded on <base>groups and the ring follows at once: it holds
-- the group iff the group is ready (ring_sync), and a group made ready wakes a consumer.
-- Clearing a rate drops the group's start log; a block already on gwait runs its course.
--@include ring
--@include now
local p, g, op = ARGV[1], ARGV[2], ARGV[3]
redis.call('SADD', p .. 'groups', g)
local until_ms = tonumber(ARGV[4] or '')
if op == 'pause' and until_ms and until_ms <= now_ms() then
  op = 'resume'
end
if op == 'pause' then
  redis.call('HSET', KEYS[1], 'paused', '1')
  if until_ms then
    redis.call('HSET', KEYS[1], 'paused_until', until_ms)
    redis.call('ZADD', p .. 'gwait', until_ms, g)
    wake(p .. 'due')
  else
    redis.call('HDEL', KEYS[1], 'paused_until')
  end
elseif op == 'resume' then
  -- the pause's own wait on gwait goes with it (a rate block there is left alone)
  local pu = redis.call('HGET', KEYS[1], 'paused_until')
  if pu and tonumber(redis.call('ZSCORE', p .. 'gwait', g) or '-1') == tonumber(pu) then
    redis.call('ZREM', p .. 'gwait', g)
  end
  redis.call('HDEL', KEYS[1], 'paused', 'paused_until')
elseif op == 'limit' then
  if ARGV[4] == '' then
    redis.call('HDEL', KEYS[1], 'limit')
  else
    redis.call('HSET', KEYS[1], 'limit', ARGV[4])
  end
elseif op == 'rate' then
  if ARGV[4] == '' then
    redis.call('HDEL', KEYS[1], 'rate_max', 'rate_ms')
    redis.call('DEL', KEYS[1] .. ':starts', KEYS[1] .. ':starts:n')
  else
    redis.call('HSET', KEYS[1], 'rate_max', ARGV[4], 'rate_ms', ARGV[5])
  end
elseif op == 'weight' then
  if ARGV[4] == '1' then
    redis.call('HDEL', KEYS[1], 'weight', 'streak')
  else
    redis.call('HSET', KEYS[1], 'weight', ARGV[4])
  end
else
  return redis.error_reply('ERR unknown group control ' .. op)
end
ring_sync(p, g)
return 1
