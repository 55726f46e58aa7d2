-- the @schedule script: admit a job fenced out of pending until its run-at.
-- KEYS[1] = the job row, KEYS[2] = the schedule set
-- ARGV[1] = id, ARGV[2] = payload, ARGV[3] = 'in' or 'at', ARGV[4] = the value, and
-- optionally the option tail ARGV[5..10] = priority, group, unique key, unique_for ms,
-- notify ms, the deadline ('+<ms>' after SERVER now or '<ms>' absolute) ('' = none; see
-- includes/admit.lua)
-- Reply: 1 admitted, 0 the id already has a row, or the owner's id when a live job owns
-- the unique key (nothing written either way).
-- 'in' prices the delay on the SERVER clock; any other mode takes the value as an
-- absolute run-at in ms (priced by the caller's clock). Priority and group ride on the
-- row; promote reads them when the job comes due.
-- Derived (same slot): the queue base, KEYS[2] minus 'schedule'.
-- Refusals (nothing written): EMQKIND, and a due that is not a finite number or prices a
-- score past year 9999 (includes/bound.lua: ERR EMQ.SCHEDULE due ...).
--@include kind
--@include row
--@include seen
--@include price
--@include lead
--@include count
--@include bound
if not is_job(ARGV[1]) then
  return redis.error_reply(KIND_ERROR)
end
local p = string.sub(KEYS[2], 1, -9)
local mode = ARGV[3] == 'in' and 'in' or 'at'
local now = now_ms()
local refused = due_refusal('SCHEDULE', mode, ARGV[4], now)
if refused then return redis.error_reply(refused) end
-- No option tail: admit() without its options, before the includes it needs are defined
-- (see enqueue-2.lua); the same writes and reply.
if #ARGV == 4 then
  if seen_recently(p, ARGV[1]) or not new_row(KEYS[1], 'scheduled', ARGV[2]) then
    return 0
  end
  local score = price(mode, ARGV[4], now)
  lead(p, score)
  redis.call('ZADD', KEYS[2], score, ARGV[1])
  count(p, 'enqueued')
  return 1
end
--@include admit
local opts = admit_opts(5, true)
opts.now = now
return admit(p, ARGV[1], ARGV[2], mode, ARGV[4], opts)
