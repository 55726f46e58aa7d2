-- The lane choice: a waiting job sits on pending, or on its group's lane
-- <base>g:<group>:pending when its row carries a group, scored by its priority (absent =
-- 0) so ZPOPMIN gives "lowest priority, then mint order" (equal scores sort by member
-- bytes, and an id's bytes are its mint order). A job joining a lane puts its group in the
-- ring when the group is ready (ring_sync).
--@include ring
-- lane_of(p, jk): the key, the score and the group (false when flat) for row jk.
local function lane_of(p, jk)
  local f = redis.call('HMGET', jk, 'group', 'priority')
  local score = tonumber(f[2] or '0') or 0
  if f[1] then
    return p .. 'g:' .. f[1] .. ':pending', score, f[1]
  end
  return p .. 'pending', score, false
end
-- leave_lane(p, jk, id): take the pending job of row jk off its lane (pending, or its
-- group's lane, whose ring place is then re-synced).
local function leave_lane(p, jk, id)
  local key, _, g = lane_of(p, jk)
  redis.call('ZREM', key, id)
  if g then ring_sync(p, g) end
end
-- readmit(p, jk, id): put the job of row jk back where it waits and write it pending.
-- A flat job leaves a wake token, a grouped one offers its group to the ring; returns the
-- group (false when flat).
local function readmit(p, jk, id)
  local key, score, g = lane_of(p, jk)
  redis.call('ZADD', key, score, id)
  redis.call('HSET', jk, 'state', 'pending')
  if g then
    ring_sync(p, g)
  else
    wake(p .. 'wake')
  end
  return g
end
