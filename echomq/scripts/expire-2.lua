-- the @expire script: the deadline sweep: end waiting jobs whose deadline has passed.
-- KEYS[1] = the deadlines set (emq:{q}:deadlines), KEYS[2] = the expired set
-- ARGV[1] = the queue base (rows, pending, lanes and the schedule derive from it),
-- ARGV[2] = the batch
-- Reply: how many jobs ended expired or timed out (at most the batch).
-- Entries scored at or before SERVER now are read oldest first. A job still waiting
-- (pending, its group's lane, the schedule) leaves that set and ends expired in the same
-- call (includes/expiry.lua); its group's ring place follows. Any other entry (a job that
-- started, ended or lost its row) only leaves the deadlines set. Claim and promote check
-- deadlines themselves; this sweep ends the jobs nothing pops: a paused queue, a group at
-- its limit, a run-at past the deadline.
-- A batch member that expires has its end written for its batch (ended() ->
-- includes/member.lua: the queue's flow outbox).
-- A durable wait's timeout shares the set (includes/waits.lua): a job still waiting on a
-- signal whose wait_until is at or before now times out here: its step is recorded
-- timed_out, it leaves every wait index and goes back to pending at its priority (or its
-- group's lane), claimable, in the same call; a wait_until still ahead is re-scored.
--@include now
--@include lane
--@include expiry
--@include waits
local p = ARGV[1]
local now = now_ms()
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local n = 0
for _, id in ipairs(due) do
  local jk = p .. 'job:' .. id
  local f = redis.call('HMGET', jk, 'state', 'expires', 'wait_until')
  local at = tonumber(f[2] or '')
  local waiting = f[1] == 'pending' or f[1] == 'scheduled'
  local till = tonumber(f[3] or '')
  if f[1] == 'waiting' and till and till <= now then
    unwait(p, jk, id, 'timed_out', now)
    readmit(p, jk, id)
    n = n + 1
  elseif f[1] == 'waiting' and till then
    redis.call('ZADD', KEYS[1], till, id)
  elseif waiting and at and at <= now then
    if f[1] == 'scheduled' then
      redis.call('ZREM', p .. 'schedule', id)
    else
      leave_lane(p, jk, id)
    end
    expire_row(p, jk, id, now)
    n = n + 1
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return n
