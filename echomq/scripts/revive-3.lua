-- the @revive script: send a dead-lettered job back to pending for a fresh run.
-- KEYS[1] = the job row, KEYS[2] = the dead set, KEYS[3] = pending
-- ARGV[1] = id
-- Reply: 1 revived. Refusals (nothing written): EMQKIND, EMQSTALE job gone,
-- EMQSTATE revive not dead.
-- The row is written state = pending with attempts, stalled and delays 0 (a fresh budget
-- of attempts: the budget counts attempts less delays); failures and the last error stay
-- as history. It waits at its priority; a
-- grouped row rejoins its lane.
-- A flow parent some of whose children have not completed (it was failed by a child)
-- goes back to waiting-children instead: it runs when they have (revive the dead ones).
-- Derived (same slot): the queue base and the wake list, from KEYS[3] minus 'pending'.
--@include kind
--@include lane
--@include now
--@include flow
if not is_job(ARGV[1]) then
  return redis.error_reply(KIND_ERROR)
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('EMQSTALE job gone')
end
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  return redis.error_reply('EMQSTATE revive not dead')
end
local p = string.sub(KEYS[3], 1, -8)
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[1], 'attempts', '0', 'stalled', '0', 'delays', '0')
redis.call('HDEL', KEYS[1], 'died_at')
if redis.call('HGET', KEYS[1], 'flow') then
  redis.call('HDEL', KEYS[1], 'flow_failed')
  flow_kept(p, ARGV[1])
  if redis.call('SCARD', p .. 'deps:' .. ARGV[1]) > 0
      or redis.call('SCARD', p .. 'failed:' .. ARGV[1]) > 0 then
    redis.call('HSET', KEYS[1], 'state', 'waiting-children')
    redis.call('ZADD', p .. 'waiting-children', now_ms(), ARGV[1])
    return 1
  end
end
readmit(p, KEYS[1], ARGV[1])
return 1
