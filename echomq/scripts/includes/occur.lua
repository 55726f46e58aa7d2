-- Occurrences of a recurrence registration (@fire, @backfill, @trigger), under its overlap
-- policy (the record's overlap: '' = allow, skip, buffer_one, buffer_all, cancel_other;
-- Temporal's meanings). An occurrence is live while it waits, runs or retries (pending,
-- scheduled, active). A slot due while the last occurrence (the record's last_id) is live:
--   allow         starts anyway
--   skip          is passed over
--   buffer_one    waits for the live one to end, unless one already waits (then passed)
--   buffer_all    waits behind the last one, so they run one after another
--   cancel_other  cancels the live one (a waiting one at once, a running one is asked to
--                 stop at its next lease checkpoint; a waiting buffered one gives way)
--                 and starts once it has ended
-- A waiting occurrence is admitted on the schedule at PARK (no promote reaches it) with
-- after = the id it follows, and that job's row gets follower = its id: the script that
-- ends the followed job releases it (includes/ended.lua: release_follower).
-- Slots fired are remembered on <record>:slots (score = member = the slot ms, the newest
-- SLOTS_KEPT), so a backfill never fires a slot twice.
--@include admit
--@include lane
local PARK = 253402300799999
local SLOTS_KEPT = 10000
local function live(p, id)
  if not id then return false end
  local st = redis.call('HGET', p .. 'job:' .. id, 'state')
  return st == 'pending' or st == 'scheduled' or st == 'active'
end
-- unpark(p, id): a held occurrence whose job to follow is gone for good (deleted) waits
-- no longer: it is due now.
local function unpark(p, id)
  local jk = p .. 'job:' .. id
  local after = redis.call('HGET', jk, 'after')
  if after and not live(p, after) then
    local now = now_ms()
    lead(p, now)
    redis.call('ZADD', p .. 'schedule', 'XX', now, id)
    redis.call('HDEL', jk, 'after')
    return nil
  end
  return after
end
-- stop(p, id): cancel_other's cancel of a live occurrence.
local function stop(p, id)
  local jk = p .. 'job:' .. id
  local st = redis.call('HGET', jk, 'state')
  if st == 'active' then
    redis.call('HSET', jk, 'cancel', '1')
    return
  end
  if st == 'scheduled' then
    redis.call('ZREM', p .. 'schedule', id)
  else
    leave_lane(p, jk, id)
  end
  cancel_row(p, jk, id)
end
-- occur(p, rk, id, template, at): admit occurrence id of the registration on record rk:
-- claimable now (at = ''), or on the schedule at `at` (a jittered run-at), or held behind
-- the live one. Returns 1 started (now or at its run-at), 2 held, 0 passed over.
local function occur(p, rk, id, template, at)
  local policy = redis.call('HGET', rk, 'overlap') or ''
  local last = redis.call('HGET', rk, 'last_id')
  if policy ~= '' and live(p, last) then
    local parked = unpark(p, last)
    local head = last
    if policy == 'skip' then return 0 end
    if policy == 'buffer_one' and parked then return 0 end
    if policy == 'cancel_other' then
      stop(p, last)
      if parked then head = parked end
      if not live(p, head) then head = nil end
    end
    if head then
      admit(p, id, template, 'at', PARK, {fields = {'after', head}})
      redis.call('HSET', p .. 'job:' .. head, 'follower', id)
      redis.call('HSET', rk, 'last_id', id)
      return 2
    end
  end
  if at == '' then
    admit(p, id, template, 'now', 0, {})
  else
    admit(p, id, template, 'at', at, {})
  end
  redis.call('HSET', rk, 'last_id', id)
  return 1
end
-- remember(rk, slot): slot fired (kept for backfills).
local function remember(rk, slot)
  redis.call('ZADD', rk .. ':slots', slot, slot)
  if redis.call('ZCARD', rk .. ':slots') > SLOTS_KEPT then
    redis.call('ZREMRANGEBYRANK', rk .. ':slots', 0, -(SLOTS_KEPT + 1))
  end
end
