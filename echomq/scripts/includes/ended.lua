-- The bookkeeping every transition that ends a job runs, in the same script as the end
-- itself (so a counter, a release or a notification is never out of step with the row).
--@include now
--@include flow
--@include count
--@include lead
--@include member
-- release_unique(p, key, id, until_ms): the unique key <base>unique:<key> is released by
-- the job that owns it: deleted, or left to expire at unique_until (SERVER ms) when that
-- is still ahead (the unique_for window outlives the job). A key another job owns by now
-- is left alone.
local function release_unique(p, key, id, until_ms)
  local uk = p .. 'unique:' .. key
  if redis.call('GET', uk) ~= id then return end
  local u = tonumber(until_ms or '')
  if u and u > now_ms() then
    redis.call('PEXPIREAT', uk, u)
  else
    redis.call('DEL', uk)
  end
end
-- release_follower(p, fid, id): the recurrence occurrence fid held behind job id (an
-- overlap policy's buffer: includes/occur.lua) is due now that id ended.
local function release_follower(p, fid, id)
  local fk = p .. 'job:' .. fid
  local g = redis.call('HMGET', fk, 'state', 'after')
  if g[1] == 'scheduled' and g[2] == id then
    local now = now_ms()
    lead(p, now)
    redis.call('ZADD', p .. 'schedule', 'XX', now, fid)
    redis.call('HDEL', fk, 'after')
  end
end
-- ended(p, jk, id, how): a job ended 'completed', 'dead', 'cancelled' or 'expired';
-- called while its row still exists (an ack that deletes the row calls it first). Counts
-- it, releases its unique key (and its debounce key), when the row asked for it (notify =
-- keep ms) leaves one token naming the end on <base>done:<id> for waiters (BLPOP), kept
-- that long, and when the row is a flow child records the end on its queue's flow outbox
-- (flow_settled); a flow parent's bookkeeping starts its expiry (flow_ended); the flow
-- nodes linked to it (its unique key was theirs) settle with it (flow_watched); a
-- recurrence occurrence held behind it is released (release_follower). A batch member
-- that ended any other way than completed has its end recorded for its batch
-- (member_ended: the reaper, the deadline sweep and a cancel have no worker to tell it).
local function ended(p, jk, id, how)
  count(p, how)
  if how ~= 'completed' then member_ended(p, jk, id, how) end
  local f = redis.call('HMGET', jk, 'unique', 'unique_until', 'notify', 'parent', 'policy',
    'error', 'flow', 'watched', 'debounce', 'follower')
  if f[1] then release_unique(p, f[1], id, f[2]) end
  if f[9] then
    -- a debounced job's key: released unless a later window owns it already
    local dk = p .. 'debounce:' .. f[9]
    if redis.call('HGET', dk, 'id') == id then redis.call('DEL', dk) end
  end
  if f[3] then
    local dk = p .. 'done:' .. id
    redis.call('DEL', dk)
    redis.call('RPUSH', dk, how)
    redis.call('PEXPIRE', dk, tonumber(f[3]))
  end
  if f[4] then flow_settled(p, jk, id, how, f[4], f[5], f[6]) end
  if f[10] then release_follower(p, f[10], id) end
  if f[7] then flow_ended(p, id) end
  if f[8] then flow_watched(p, id, how, f[6]) end
end
-- cancel_row(p, jk, id, now): end the job of row jk cancelled: state = cancelled,
-- cancelled_at = SERVER ms (now, or TIME), on the cancelled set scored by that ms (kept
-- and trimmed like the dead set). The caller has taken the id off every other set.
local function cancel_row(p, jk, id, now)
  now = now or now_ms()
  redis.call('HSET', jk, 'state', 'cancelled', 'cancelled_at', now)
  redis.call('HDEL', jk, 'cancel')
  redis.call('ZADD', p .. 'cancelled', now, id)
  ended(p, jk, id, 'cancelled')
end
