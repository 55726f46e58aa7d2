-- the @revive script: send a dead-lettered job back to pending for a fresh run.
-- KEYS[1] = the job row, KEYS[2] = the dead set, KEYS[3] = pending
-- ARGV[1] = id
-- Reply: 1 revived. Refusals (nothing written): EMQKIND, EMQSTALE job gone,
-- EMQSTATE revive not dead.
-- The row is written state = pending with attempts 0 and stalled 0 (a fresh budget of
-- attempts); failures and the last error stay as history. It waits at its priority; a
-- grouped row rejoins its lane.
-- Derived (same slot): the queue base and the wake list, from KEYS[3] minus 'pending'.
--@include kind
--@include lane
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
redis.call('HSET', KEYS[1], 'attempts', '0', 'stalled', '0')
redis.call('HDEL', KEYS[1], 'died_at')
readmit(p, KEYS[1], ARGV[1])
return 1
