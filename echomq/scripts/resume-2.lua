-- the @resume script: a signal resumes the jobs of one queue waiting for its key.
-- KEYS[1] = the queue's waiters of the key (emq:{q}:signal:<key>), KEYS[2] = the waiting
-- set (emq:{q}:waiting)
-- ARGV[1] = the queue base, ARGV[2] = the signal key, ARGV[3] = the signal's payload
-- Reply: how many jobs it resumed. Each job still waiting for this key gets the payload
-- as its step's result (state done at SERVER now), leaves every wait index and goes back
-- to pending at its priority (or its group's lane), in this one call; ids that moved on
-- meanwhile (resumed, timed out, cancelled, deleted) are only dropped. The waiters' set
-- is emptied, so a second resume with the same key resumes nothing (idempotent: the
-- signal's sender and a late waiter that found the signal stored may both run it).
-- Bounded by the queue's waiters of this one key.
--@include now
--@include lane
--@include waits
local p, key = ARGV[1], ARGV[2]
local now = now_ms()
local n = 0
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local jk = p .. 'job:' .. id
  local f = redis.call('HMGET', jk, 'state', 'wait_key')
  if f[1] == 'waiting' and f[2] == key then
    unwait(p, jk, id, 'done', now, ARGV[3])
    readmit(p, jk, id)
    n = n + 1
  end
end
redis.call('DEL', KEYS[1])
return n
