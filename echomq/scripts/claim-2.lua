-- the @claim script: lease the next pending jobs, in mint order.
-- KEYS[1] = pending, KEYS[2] = active
-- ARGV[1] = the queue base, ARGV[2] = lease ms, ARGV[3] = how many at most (default 1)
-- Reply: a flat array id1, token1, payload1, id2, ... (empty when pending is empty).
-- The token is the row's attempts after the increment; every later verb on the job in
-- hand is fenced on it. The lease expires at SERVER now + lease ms (the active score).
-- A ghost (an id in pending with no row) is dropped and does not count.
--@include now
--@include wake
local p = ARGV[1]
local want = tonumber(ARGV[3] or '1')
local expires = now_ms() + tonumber(ARGV[2])
local out = {}
local got = 0
while got < want do
  local popped = redis.call('ZPOPMIN', KEYS[1])
  if #popped == 0 then break end
  local id = popped[1]
  local jk = p .. 'job:' .. id
  local payload = redis.call('HGET', jk, 'payload')
  if payload then
    local att = redis.call('HINCRBY', jk, 'attempts', 1)
    redis.call('HSET', jk, 'state', 'active')
    redis.call('ZADD', KEYS[2], expires, id)
    out[#out + 1] = id
    out[#out + 1] = att
    out[#out + 1] = payload
    got = got + 1
  end
end
-- work left behind wakes the next blocked consumer
if got == want and redis.call('ZCARD', KEYS[1]) > 0 then
  wake(p .. 'wake')
end
return out
