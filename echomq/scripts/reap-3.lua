-- the @reap script: return expired leases, on the SERVER clock.
-- KEYS[1] = active, KEYS[2] = pending, KEYS[3] = dead
-- ARGV[1] = the queue base, ARGV[2] = the batch, ARGV[3] = max stalls before dead-lettering,
-- optionally ARGV[4] = '1': reply with the ids instead of their count (a worker's log names them)
-- Reply: the count of expired leases handled (returned or dead-lettered), at most the batch
-- (with ARGV[4] = '1', those ids).
-- Each expired job gets stalled + 1. Past the threshold (for a durable job: the stalls since
-- its last recorded step, stalled - stall_base) it is dead-lettered (state = dead,
-- error 'stalled', on the dead set at now); otherwise it rejoins pending (or its lane) with
-- state = pending and its attempts kept, so the next claim's token fences the old holder;
-- it waits at its row's priority.
-- A row marked cancel = 1 (a cancel was requested while it ran) ends cancelled instead.
-- Counted on emq:{q}:stats: dead (and failed) or cancelled.
-- A grouped job lowers its group's active count.
-- A batch member dead-lettered or cancelled here has its end written for its batch
-- (ended() -> includes/member.lua: the queue's flow outbox).
-- A ghost (an active id with no row) is only removed from active.
--@include ended
--@include lane
local p = ARGV[1]
local now = now_ms()
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local limit = tonumber(ARGV[3])
for _, id in ipairs(expired) do
  redis.call('ZREM', KEYS[1], id)
  local jk = p .. 'job:' .. id
  left_active(p, jk)
  if redis.call('HGET', jk, 'cancel') then
    cancel_row(p, jk, id, now)
  elseif redis.call('EXISTS', jk) == 1 then
    local stalled = redis.call('HINCRBY', jk, 'stalled', 1)
    -- a durable job counts the stalls since its last recorded step (includes/journal.lua)
    if stalled - tonumber(redis.call('HGET', jk, 'stall_base') or '0') > limit then
      redis.call('HSET', jk, 'state', 'dead', 'error', 'stalled', 'died_at', now)
      redis.call('ZADD', KEYS[3], now, id)
      count(p, 'failed')
      ended(p, jk, id, 'dead')
    else
      readmit(p, jk, id)
    end
  end
end
if ARGV[4] == '1' then return expired end
return #expired
