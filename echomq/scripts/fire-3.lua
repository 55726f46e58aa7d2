-- the @fire script: fire one due registration, exactly once per due period.
-- KEYS[1] = the repeat set, KEYS[2] = the repeat:<name> record, KEYS[3] = pending
-- ARGV[1] = name, ARGV[2] = the score the caller read on the repeat set (HOST ms),
-- ARGV[3] = the queue base (occurrence rows derive from it),
-- ARGV[4] = the next-run ms (HOST clock, priced by the caller) or '' when there is none,
-- ARGV[5] = the slot instant the (last) occurrence stands for (HOST ms, kept as last_at),
-- ARGV[6..] = the occurrence ids, minted on the host, one per slot, oldest slot first
-- Reply: {'fired', n} n occurrences enqueued (n may be 0: every slot was skipped) or
-- {'raced'|'absent'|'paused'|'limit'|'overlap', 0}, nothing enqueued:
--   raced   the name's score is no longer the one read (another pump fired it, or it was
--           updated, cancelled or re-registered since): nothing written
--   absent  the record is gone (cancelled mid-sweep): the dangling member is removed
--   paused  the registration is paused (repeat_hold): nothing written, its score kept
--   limit   the occurrence limit was already reached: the member is parked at +inf
--   overlap overlap=skip and the last occurrence is still pending, scheduled or active:
--           the name moves to its next run
-- Derived (same slot): occurrence rows ARGV[3]..'job:'..id, the wake list (KEYS[3] with
-- 'pending' replaced by 'wake'). Check, enqueue and advance are one transition, so two
-- pumps that read the same due score enqueue once, and a pump that dies leaves either
-- nothing or all of it.
--@include kind
--@include admit
--@include park
local name = ARGV[1]
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('ZREM', KEYS[1], name)
  return {'absent', 0}
end
local cur = redis.call('ZSCORE', KEYS[1], name)
if (not cur) or tonumber(cur) ~= tonumber(ARGV[2]) then
  return {'raced', 0}
end
if redis.call('HEXISTS', KEYS[2], 'paused') == 1 then
  return {'paused', 0}
end
for i = 6, #ARGV do
  if not is_job(ARGV[i]) then
    return redis.error_reply(KIND_ERROR)
  end
end
local function move_on()
  park_or_run(KEYS[1], KEYS[2], name, ARGV[4])
end
local fired = tonumber(redis.call('HGET', KEYS[2], 'fired') or '0')
local limit = redis.call('HGET', KEYS[2], 'limit')
if limit then
  limit = tonumber(limit)
  if fired >= limit then
    park(KEYS[1], KEYS[2], name, 'limit')
    return {'limit', 0}
  end
end
if redis.call('HGET', KEYS[2], 'overlap') == 'skip' then
  local last = redis.call('HGET', KEYS[2], 'last_id')
  if last then
    local st = redis.call('HGET', ARGV[3] .. 'job:' .. last, 'state')
    if st == 'pending' or st == 'active' or st == 'scheduled' then
      move_on()
      return {'overlap', 0}
    end
  end
end
local template = redis.call('HGET', KEYS[2], 'template') or ''
local room = #ARGV - 5
if limit and limit - fired < room then
  room = limit - fired
end
local n, last_id = 0, nil
for i = 6, 5 + room do
  local id = ARGV[i]
  -- the @enqueue admission: a normal pending job claimable now, in mint order (it leaves
  -- the wake token too)
  if admit(ARGV[3], id, template, 'now', 0, {}) == 1 then
    n = n + 1
    last_id = id
  end
end
if n > 0 then
  redis.call('HSET', KEYS[2], 'fired', fired + n, 'last_id', last_id, 'last_at', ARGV[5])
end
if limit and fired + n >= limit then
  park(KEYS[1], KEYS[2], name, 'limit')
else
  move_on()
end
return {'fired', n}
