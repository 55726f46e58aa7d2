-- the @repeat_hold script: pause or resume one recurrence registration.
-- KEYS[1] = the repeat set, KEYS[2] = the repeat:<name> record
-- ARGV[1] = name, ARGV[2] = 'pause' or 'resume',
-- ARGV[3] = with 'resume': the re-armed next run (HOST ms, priced by the caller from HOST
--           now and the definition) or '' when the definition has no run left (ended)
-- Reply: 1 done (pausing a paused or resuming a live registration is a no-op), 0 absent:
-- no record has that name (a dangling member is removed).
-- Pause only marks the record ('paused' = '1'): record and next-run score stay, and the
-- @fire script refuses a paused name, so no occurrence is minted while paused. Resume
-- re-arms from now rather than from the old score, so the runs missed while paused are
-- not caught up; a finished (done) registration stays parked.
--@include park
local name = ARGV[1]
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('ZREM', KEYS[1], name)
  return 0
end
if ARGV[2] == 'pause' then
  redis.call('HSET', KEYS[2], 'paused', '1')
  return 1
end
if redis.call('HDEL', KEYS[2], 'paused') == 0 then
  return 1
end
if redis.call('HGET', KEYS[2], 'done') then
  return 1
end
local limit = redis.call('HGET', KEYS[2], 'limit')
local fired = tonumber(redis.call('HGET', KEYS[2], 'fired') or '0')
if limit and fired >= tonumber(limit) then
  park(KEYS[1], KEYS[2], name, 'limit')
else
  park_or_run(KEYS[1], KEYS[2], name, ARGV[3])
end
return 1
