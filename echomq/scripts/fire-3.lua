-- the @fire script: fire one due registration, exactly once per due period.
-- KEYS[1] = the repeat set, KEYS[2] = the repeat:<name> record, KEYS[3] = pending
-- ARGV[1] = name, ARGV[2] = the score the caller read on the repeat set (HOST ms),
-- ARGV[3] = the queue base (occurrence rows derive from it),
-- ARGV[4] = the next-run ms (HOST clock, priced by the caller) or '' when there is none,
-- ARGV[5] = the slot instant the (last) occurrence stands for (HOST ms, kept as last_at),
-- ARGV[6..] = per slot, oldest first, three values: the occurrence id (minted on the
-- host), its run-at ('' = claimable now; else the slot plus its jitter, on the schedule),
-- the slot (ms, remembered for backfills)
-- Reply: {'fired', n, id...} n occurrences enqueued, their ids (n may be 0: every slot was
-- skipped) or
-- {'raced'|'absent'|'paused'|'limit'|'overlap', 0}, nothing enqueued:
--   raced   the name's score is no longer the one read (another pump fired it, or it was
--           updated, cancelled or re-registered since): nothing written
--   absent  the record is gone (cancelled mid-sweep): the dangling member is removed
--   paused  the registration is paused (repeat_hold): nothing written, its score kept
--   limit   the occurrence limit was already reached: the member is parked at +inf
--   overlap the overlap policy passed every slot (the last occurrence is still live: skip,
--           or buffer_one with one already held): the name moves to its next run
-- Each occurrence is admitted under the record's overlap policy (includes/occur.lua: it
-- may wait behind the live one, or cancel it). Derived (same slot): occurrence rows
-- ARGV[3]..'job:'..id, the wake list. Check, enqueue and advance are one transition, so
-- two pumps that read the same due score enqueue once, and a pump that dies leaves either
-- nothing or all of it.
--@include kind
--@include occur
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
for i = 6, #ARGV, 3 do
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
local template = redis.call('HGET', KEYS[2], 'template') or ''
local room = (#ARGV - 5) / 3
if limit and limit - fired < room then
  room = limit - fired
end
local n, passed, ids = 0, 0, {}
for k = 0, room - 1 do
  local i = 6 + 3 * k
  if occur(ARGV[3], KEYS[2], ARGV[i], template, ARGV[i + 1]) > 0 then
    n = n + 1
    ids[n] = ARGV[i]
    remember(KEYS[2], ARGV[i + 2])
  else
    passed = passed + 1
  end
end
if n > 0 then
  redis.call('HSET', KEYS[2], 'fired', fired + n, 'last_at', ARGV[5])
end
if limit and fired + n >= limit then
  park(KEYS[1], KEYS[2], name, 'limit')
else
  move_on()
end
if n == 0 and passed > 0 then return {'overlap', 0} end
return {'fired', n, unpack(ids)}
