-- the @claim script: lease the next pending jobs, in mint order.
-- KEYS[1] = pending, KEYS[2] = active
-- ARGV[1] = the queue base, ARGV[2] = lease ms, ARGV[3] = how many at most (default 1)
-- Reply: a flat array id1, token1, payload1, id2, ... (empty when pending is empty).
-- The token is the row's attempts after the increment; every later verb on the job in
-- hand is fenced on it. The lease expires at SERVER now + lease ms (the active score).
-- A ghost (an id in pending with no row) is dropped and does not count; a row marked
-- cancel = 1 (cancel requested while it ran, then delayed) ends cancelled, not claimed.
-- While the queue is paused (emq:{q}:paused exists) nothing is claimed: empty reply.
--@include now
--@include wake
--@include ended
--@include chunks
local p = ARGV[1]
if redis.call('EXISTS', p .. 'paused') == 1 then return {} end
local want = tonumber(ARGV[3] or '1')
local expires = now_ms() + tonumber(ARGV[2])
local out, leased = {}, {}
while #out < 3 * want do
  local popped = redis.call('ZPOPMIN', KEYS[1], want - #out / 3)
  if #popped == 0 then break end
  for i = 1, #popped, 2 do
    local id = popped[i]
    local jk = p .. 'job:' .. id
    local row = redis.call('HMGET', jk, 'payload', 'attempts', 'cancel')
    if row[3] then
      cancel_row(p, jk, id)
    elseif row[1] then
      local att = tonumber(row[2] or '0') + 1
      redis.call('HSET', jk, 'attempts', att, 'state', 'active')
      leased[#leased + 1] = expires
      leased[#leased + 1] = id
      out[#out + 1] = id
      out[#out + 1] = att
      out[#out + 1] = row[1]
    end
  end
end
in_chunks(leased, 2000, function(...) redis.call('ZADD', KEYS[2], ...) end)
-- work left behind wakes the next blocked consumer
if #out == 3 * want and redis.call('ZCARD', KEYS[1]) > 0 then
  wake(p .. 'wake')
end
return out
