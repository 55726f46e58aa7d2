-- the @promote script: release due scheduled jobs, on the SERVER clock.
-- KEYS[1] = the schedule set, KEYS[2] = pending
-- ARGV[1] = the queue base (row, lane and wake keys derive from it), ARGV[2] = the batch
-- Reply: the count of members released (at most the batch).
-- A flat job rejoins pending scored by its row's priority (absent = 0), so it sorts by
-- priority then mint order, not by release order; a row carrying a group rejoins its lane
-- emq:{q}:g:<group>:pending at its priority, and the group joins the ring when ready
-- (paused or full groups still receive their jobs). Groups blocked on gwait whose time has
-- come rejoin the ring. Idempotent: a member already moved is gone from the schedule set.
-- A due row past its deadline ends expired instead (includes/expiry.lua; it counts as
-- released). The native twin EMQ.PROMOTE moves it to pending, where its claim expires it.
--@include now
--@include lane
--@include chunks
--@include expiry
local p = ARGV[1]
local now = now_ms()
reopen(p, now)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
if #due == 0 then return 0 end
local flat, groups = {}, {}
for _, id in ipairs(due) do
  local jk = p .. 'job:' .. id
  if not deadline_passed(p, jk, id, now) then
    local key, score, g = lane_of(p, jk)
    if g then
      redis.call('ZADD', key, score, id)
      groups[g] = true
    else
      flat[#flat + 1] = score
      flat[#flat + 1] = id
    end
    -- the state is written pending whether or not a row was there (a missing row gets a
    -- row holding the state alone)
    redis.call('HSET', jk, 'state', 'pending')
  end
end
in_chunks(due, 1000, function(...) redis.call('ZREM', KEYS[1], ...) end)
-- each lane that grew offers its group to the ring (and wakes a consumer when it joins)
for g in pairs(groups) do ring_sync(p, g) end
if #flat > 0 then
  in_chunks(flat, 2000, function(...) redis.call('ZADD', KEYS[2], ...) end)
  wake(p .. 'wake')
end
return #due
