-- the @debounce script: fold a burst of calls into one job, with a cap on how long a steady
-- stream can postpone it.
-- KEYS[1] = the debounce key emq:{q}:debounce:<key> (a hash: id, first),
-- KEYS[2] = the schedule set
-- ARGV[1] = the queue base (rows, pending, lanes derive from it),
-- ARGV[2] = a fresh id (the job a new window admits), ARGV[3] = payload,
-- ARGV[4] = debounce ms, ARGV[5] = the cap: debounce_max ms after the first call ('' = none),
-- ARGV[6..11] = the option tail: priority, group, unique key, unique_for ms, notify ms,
-- the deadline ('' = none; see includes/admit.lua)
-- Reply: {id, 1} a new window: job id admitted on the schedule at SERVER now + debounce
-- ms; {id, 0} the call folded into the job id that waits for the key (scheduled, or
-- pending, or on its lane, not started): its payload is replaced and its run-at moves to
-- SERVER now + debounce ms, never past first call + the cap (a job already due within
-- the cap stays where it is; a pending one whose window was reopened goes back on the
-- schedule). A key whose job started (running, or waiting for a retry), ended or is gone
-- opens a new window: a job that started is never touched. {owner, 2}: a live job owns the unique key (nothing written).
-- The job keeps the options of the call that admitted it; its row carries debounce =
-- <key>, and its end releases the key (includes/ended.lua). Refusal: EMQKIND.
--@include kind
--@include admit
--@include lane
if not is_job(ARGV[2]) then
  return redis.error_reply(KIND_ERROR)
end
local p = ARGV[1]
local now = now_ms()
local span = tonumber(ARGV[4])
local cap = tonumber(ARGV[5])
local held = redis.call('HMGET', KEYS[1], 'id', 'first')
local id = held[1]
if id then
  local jk = p .. 'job:' .. id
  local f = redis.call('HMGET', jk, 'state', 'attempts')
  local st = f[1]
  -- attempts = 0: it never started (a retry waits on the schedule too, but it ran)
  if (st == 'scheduled' or st == 'pending') and f[2] == '0' then
    local at = now + span
    if cap then at = math.min(at, tonumber(held[2]) + cap) end
    redis.call('HSET', jk, 'payload', ARGV[3])
    if st == 'scheduled' then
      -- a run-at only ever moves later here (now grows, the cap is fixed), so it never
      -- leads the schedule where it did not already
      if at > tonumber(redis.call('ZSCORE', KEYS[2], id) or '0') then
        redis.call('ZADD', KEYS[2], 'XX', at, id)
      end
    elseif at > now then
      -- due but not started: the window reopens, it goes back on the schedule
      leave_lane(p, jk, id)
      redis.call('HSET', jk, 'state', 'scheduled')
      lead(p, at)
      redis.call('ZADD', KEYS[2], at, id)
    end
    return {id, 0}
  end
end
local opts = admit_opts(6, true)
opts.now = now
local got = admit(p, ARGV[2], ARGV[3], 'in', span, opts)
if got ~= 1 then
  if got == 0 then return {ARGV[2], 2} end
  return {got, 2}
end
redis.call('HSET', p .. 'job:' .. ARGV[2], 'debounce', string.sub(KEYS[1], #p + 10))
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'id', ARGV[2], 'first', now)
return {ARGV[2], 1}
