-- the @ack script: token-fenced completion of a job in hand.
-- KEYS[1] = the job row, KEYS[2] = active, KEYS[3] = the completed set
-- ARGV[1] = id, ARGV[2] = the token, ARGV[3] = '1' keep the row as completed, '0' delete it,
-- optionally ARGV[4] = the result (JSON text) and ARGV[5] = keep it this many ms: written
-- to <base>result:<id> with PX in the same call (it outlives a deleted row; a deleted
-- row's task and runs are kept beside it on <base>kept:<id>: includes/kept.lua)
-- Reply: 1. Refusals (nothing written): EMQKIND, EMQSTALE job gone,
-- EMQSTALE ack token mismatch, EMQSTATE ack not active (the lease was reaped).
-- A kept row is written state = completed, completed_at = SERVER ms, and indexed on the
-- completed set by that ms so retention can trim by count and age. An ack wins over a
-- cancel request that has not ended the job yet (the job is completed, the mark dropped).
-- A deleted row's id joins <base>seen (includes/seen.lua).
-- Counted on emq:{q}:stats (completed); a grouped job lowers its group's active count. Derived: the queue base, KEYS[2] minus 'active'.
--@include fence
--@include ended
--@include ring
--@include kept
--@include seen
local refused = fence(KEYS[1], ARGV[1], ARGV[2], 'ack', KEYS[2])
if refused then return redis.error_reply(refused) end
redis.call('ZREM', KEYS[2], ARGV[1])
local p = string.sub(KEYS[2], 1, -7)
if ARGV[4] and ARGV[5] and ARGV[5] ~= '' then
  redis.call('SET', p .. 'result:' .. ARGV[1], ARGV[4], 'PX', tonumber(ARGV[5]))
end
left_active(p, KEYS[1])
ended(p, KEYS[1], ARGV[1], 'completed')
if ARGV[3] == '1' then
  local now = now_ms()
  redis.call('HSET', KEYS[1], 'state', 'completed', 'completed_at', now)
  redis.call('HDEL', KEYS[1], 'cancel')
  redis.call('ZADD', KEYS[3], now, ARGV[1])
else
  -- deleted: a kept result keeps the task and runs beside it (includes/kept.lua), and the
  -- id is marked seen so a retried admission writes nothing (includes/seen.lua)
  local now = now_ms()
  if ARGV[4] and ARGV[5] and ARGV[5] ~= '' then
    keep_beside(p, KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[5]), now)
  end
  redis.call('DEL', KEYS[1])
  mark_seen(p, {ARGV[1]}, now)
end
return 1
