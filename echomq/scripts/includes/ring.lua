-- The ring of ready groups, emq:{q}:ring: a zset scored by a rotation sequence
-- (<base>ringseq, INCR), so ZPOPMIN/ZRANGE 0 0 is the group whose turn it is and a group
-- re-added goes to the back. A group is in the ring iff it is ready: its lane has waiting
-- jobs, it is not paused, it is under its concurrency limit and it is not blocked on
-- <base>gwait (a rate window or a rate_limited(ms), scored by the SERVER ms it reopens).
-- Group meta lives on <base>g:<group> (active, limit, paused, rate_max, rate_ms);
-- <base>groups is the set of every group seen. <base>gdefaults (limit, rate_max, rate_ms:
-- a task's group_limit/group_rate) stands in for a field a group's meta does not set; only
-- a grouped claim reads it, so an ungrouped queue never pays for it. Every transition that changes one of
-- those conditions calls ring_sync for the group in the same script, so the ring never
-- disagrees with them.
--@include wake
-- group_limit(p, own): the group's own limit, else the queue's default (nil: none)
local function group_limit(p, own)
  return tonumber(own or redis.call('HGET', p .. 'gdefaults', 'limit') or '')
end
local function group_ready(p, g)
  if redis.call('ZCARD', p .. 'g:' .. g .. ':pending') == 0 then return false end
  local m = redis.call('HMGET', p .. 'g:' .. g, 'active', 'limit', 'paused')
  if m[3] then return false end
  local limit = group_limit(p, m[2])
  if limit and tonumber(m[1] or '0') >= limit then return false end
  return not redis.call('ZSCORE', p .. 'gwait', g)
end
-- ring_sync(p, g, quiet): put g at the back of the ring if it is ready and absent (and
-- leave a wake token unless quiet), take it out if it is not ready.
local function ring_sync(p, g, quiet)
  if group_ready(p, g) then
    if not redis.call('ZSCORE', p .. 'ring', g) then
      redis.call('ZADD', p .. 'ring', redis.call('INCR', p .. 'ringseq'), g)
      if not quiet then wake(p .. 'wake') end
    end
  else
    redis.call('ZREM', p .. 'ring', g)
  end
end
-- left_active(p, jk): the job of row jk left active (ack, retry, delay, reap, cancel,
-- rate_limited): a grouped job lowers its group's active count, which may make the group
-- ready again. Call it while the row exists.
local function left_active(p, jk)
  local g = redis.call('HGET', jk, 'group')
  if g then
    if redis.call('HINCRBY', p .. 'g:' .. g, 'active', -1) < 0 then
      redis.call('HSET', p .. 'g:' .. g, 'active', 0)
    end
    -- a group already on the ring stays there (one job fewer active keeps it ready)
    if not redis.call('ZSCORE', p .. 'ring', g) then ring_sync(p, g) end
  end
end
-- reopen(p, now): groups whose block on gwait is over (score <= now) rejoin the ring. A
-- group paused with an end (paused_until, SERVER ms) that has come is resumed here; one
-- whose end is still ahead (its gwait entry was overwritten by an earlier block) waits on
-- gwait for it again.
local function reopen(p, now)
  local due = redis.call('ZRANGEBYSCORE', p .. 'gwait', '-inf', now)
  for _, g in ipairs(due) do
    redis.call('ZREM', p .. 'gwait', g)
    local mk = p .. 'g:' .. g
    local pu = tonumber(redis.call('HGET', mk, 'paused_until') or '')
    if pu then
      if pu <= now then
        redis.call('HDEL', mk, 'paused', 'paused_until')
      else
        redis.call('ZADD', p .. 'gwait', pu, g)
      end
    end
    ring_sync(p, g)
  end
end
