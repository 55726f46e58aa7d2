-- the @enqueue script: admit a job claimable now.
-- KEYS[1] = the job row, KEYS[2] = pending
-- ARGV[1] = id, ARGV[2] = payload, and optionally the option tail ('' = none):
-- ARGV[3] = priority (0..1000000), ARGV[4] = group, ARGV[5] = unique key,
-- ARGV[6] = unique_for ms, ARGV[7] = notify ms, ARGV[8] = the deadline ('+<ms>' after
-- SERVER now or '<ms>' absolute; see includes/admit.lua)
-- Reply: 1 admitted, 0 the id already has a row, or the owner's id when a live job owns
-- the unique key (nothing written either way).
-- A flat job waits on pending scored by its priority (claim order: priority, then mint
-- order); a grouped one on its lane. The row keeps priority (when not 0) and group.
-- Derived (same slot): the queue base (KEYS[2] minus 'pending'), the lane and wake keys.
--@include kind
--@include row
--@include seen
--@include wake
--@include count
if not is_job(ARGV[1]) then
  return redis.error_reply(KIND_ERROR)
end
local p = string.sub(KEYS[2], 1, -8)
-- No option tail (what task.enqueue sends by default): admit() without its options, run
-- before the includes admit() needs are defined (defining them costs more than the
-- writes); the same writes and reply.
if #ARGV == 2 then
  if seen_recently(p, ARGV[1]) or not new_row(KEYS[1], 'pending', ARGV[2]) then return 0 end
  redis.call('ZADD', KEYS[2], 0, ARGV[1])
  wake(p .. 'wake')
  count(p, 'enqueued')
  return 1
end
--@include admit
return admit(p, ARGV[1], ARGV[2], 'now', 0, admit_opts(3, true))
