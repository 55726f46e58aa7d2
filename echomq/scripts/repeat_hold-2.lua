-- the @repeat_hold script: pause or resume one recurrence registration.
-- KEYS[1] = the repeat set, KEYS[2] = the repeat:<name> record
-- ARGV[1] = name, ARGV[2] = 'pause', 'resume' or 'resume_due',
-- ARGV[3] = with 'pause': the pause's end (SERVER ms) or '' (until resumed); with 'resume'
--           and 'resume_due': the re-armed next run (HOST ms, priced by the caller from
--           HOST now and the definition) or '' when the definition has no run left (ended)
-- Reply: 1 done (pausing a paused or resuming a live registration is a no-op), 0 absent:
-- no record has that name (a dangling member is removed); 'resume_due' also 2: not yet
-- (the pause has no end, or its end is after SERVER now: nothing written).
-- Pause only marks the record ('paused' = '1'): record and next-run score stay, and the
-- @fire script refuses a paused name, so no occurrence is minted while paused. A pause
-- with an end also records it (paused_until) and moves the score to that instant, so a
-- Pump planning its wake at the registry's head wakes then; the Pump's sweep resumes it
-- ('resume_due', checked here against SERVER now) as a resume would. Resume re-arms from now rather than from the old score, so the runs missed while
-- paused are not caught up; a finished (done) registration stays parked.
--@include park
--@include now
local name = ARGV[1]
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('ZREM', KEYS[1], name)
  return 0
end
if ARGV[2] == 'pause' then
  redis.call('HSET', KEYS[2], 'paused', '1')
  local until_ms = tonumber(ARGV[3] or '')
  if until_ms then
    redis.call('HSET', KEYS[2], 'paused_until', until_ms)
    if not redis.call('HGET', KEYS[2], 'done') then
      redis.call('ZADD', KEYS[1], 'XX', until_ms, name)
    end
  else
    redis.call('HDEL', KEYS[2], 'paused_until')
  end
  return 1
end
if ARGV[2] == 'resume_due' then
  local pu = tonumber(redis.call('HGET', KEYS[2], 'paused_until') or '')
  if not pu or pu > now_ms() then return 2 end
end
redis.call('HDEL', KEYS[2], 'paused_until')
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
