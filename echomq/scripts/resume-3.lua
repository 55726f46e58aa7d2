-- the @resume script: a signal resumes the jobs of one queue waiting for its key.
-- KEYS[1] = the queue's waiters of the key (emq:{q}:signal:<key>), KEYS[2] = the waiting
-- set (emq:{q}:waiting), KEYS[3] = the queue's copy of the signal
-- (emq:{q}:signalled:<key>)
-- ARGV[1] = the queue base, ARGV[2] = the signal key, ARGV[3] = the signal's payload,
-- ARGV[4] = how long the signal is kept (ms)
-- Reply: how many jobs it resumed. Each job still waiting for this key gets the payload
-- as its step's result (state done at SERVER now), leaves every wait index and goes back
-- to pending at its priority (or its group's lane), in this one call; ids that moved on
-- meanwhile (resumed, timed out, cancelled, deleted) are only dropped. The waiters' set
-- is emptied, so a second resume with the same key resumes nothing (idempotent: a sender
-- that failed part way may send the signal again).
-- The payload is copied into the queue's own slot (KEYS[3], PX ARGV[4]): a waiter that
-- registered before the signal was stored but parks after this resume ran takes it from
-- there (@wait), in the queue's slot where the two are ordered.
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
redis.call('SET', KEYS[3], ARGV[3], 'PX', tonumber(ARGV[4]))
return n
